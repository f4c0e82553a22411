"""The PostgreSQL store: the same lane and log in a database."""
