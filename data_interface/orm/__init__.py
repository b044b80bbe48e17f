"""The site on PostgreSQL through an ORM: SQLAlchemy 2's asyncio ORM over
tables of its own (models.py, sqlalchemy_data.py)."""
