"""schema.sql itself takes CREATE on the schema from everyone, so that a
database given by --postgres, where no bootstrap of ours ran, is safe too."""
import os

import asyncpg

from data_interface.postgres.asyncpg_data import apply_schema


async def test_schema_takes_create_on_public_from_everyone(postgres):
    with open(os.path.join(postgres.home, 'superuser.password')) as f:
        password = f.read().strip()
    superuser = await asyncpg.connect(
        host=postgres.host, port=postgres.port, user='postgres',
        password=password, database=postgres.database)
    try:
        await superuser.execute('GRANT CREATE ON SCHEMA public TO PUBLIC')
        check = ("SELECT has_schema_privilege('sticker_app', 'public', "
                 "'CREATE')")
        assert await superuser.fetchval(check)
        owner = await asyncpg.connect(postgres.owner_dsn)
        try:
            await owner.execute('DELETE FROM schema_digest')   # apply again
            assert await apply_schema(owner)
        finally:
            await owner.close()
        assert not await superuser.fetchval(check)
    finally:
        await superuser.close()
