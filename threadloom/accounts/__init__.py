"""Accounts of a team server: users, organisations with members and roles, the projects each organisation
holds, and per-user access tokens (issue 21). `service.Accounts` is the one entry; the SQL is in `rows.py`."""
