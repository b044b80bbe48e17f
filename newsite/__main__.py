import sys

from newsite import main

sys.exit(main())
