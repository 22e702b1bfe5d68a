"""appliance: a bulk-messaging (SMS) appliance over one SQLite file."""

__version__ = "0.1.0"
