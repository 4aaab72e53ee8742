"""Privacy accounting: ledgers, calibrated noise and accountants."""

from .ledger import Charge, PrivacyLedger

__all__ = ["Charge", "PrivacyLedger"]
