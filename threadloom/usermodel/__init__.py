"""The user model (issue 18): evidence-backed claims about how a user works, with confidence, tiers and
bi-temporal supersession. `UserModel` (service.py) is the one entry; `confidence.py` holds the numbers."""

from threadloom.usermodel.service import UserModel

__all__ = ["UserModel"]
