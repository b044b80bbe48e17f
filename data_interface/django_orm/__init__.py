"""The site on PostgreSQL through the Django ORM: tables of its own as
Django models (models.py, made by its migrations), the queries written with
the ORM (queries.py) and the DataInterface over them (data.py)."""
