"""The site on a Redis Cluster: its functions (cluster.lua), the client
(cluster_data.py), the accounts' ACL (accounts.py), the address
(address.py)."""
