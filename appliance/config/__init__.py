"""Settings: one TOML file, then environment variables, then command-line flags.

Precedence (later wins): built-in defaults < config file < ``APPLIANCE_*`` environment
variables < flags. Every key is validated at start; an unknown key or a bad value is a
:class:`ConfigError` with one clear line naming the key as the file names it.

The package: the shape of the settings (:mod:`.sections`, :mod:`.settings`), one
value read strictly (:mod:`.values`), reading them in order (:mod:`.load`), the
checks across them (:mod:`.checks`), the database URL (:mod:`.database_url`) and what
``config check`` prints (:mod:`.masking`).
"""

from .checks import MAX_PARTS_LIMIT, ensure_data_dir
from .database_url import DATABASE_SCHEMES, database_url_problem, mask_database_url
from .errors import ConfigError
from .load import load_settings
from .masking import masked, secret_values
from .options import Option, OptionValue, read_option, read_options
from .sections import (
    AlertSettings,
    BackupSettings,
    ComplianceSettings,
    HttpSettings,
    ImportSettings,
    OptoutSettings,
    ReportSettings,
    SendingSettings,
    StorageSettings,
    WebhookSettings,
)
from .settings import SECTION_ATTR, SECTIONS, SHARED_PROVIDER_SETTINGS, ProviderSettings, Settings

__all__ = [
    "DATABASE_SCHEMES",
    "MAX_PARTS_LIMIT",
    "SECTIONS",
    "SECTION_ATTR",
    "SHARED_PROVIDER_SETTINGS",
    "AlertSettings",
    "BackupSettings",
    "ComplianceSettings",
    "ConfigError",
    "HttpSettings",
    "ImportSettings",
    "Option",
    "OptionValue",
    "OptoutSettings",
    "ProviderSettings",
    "ReportSettings",
    "SendingSettings",
    "Settings",
    "StorageSettings",
    "WebhookSettings",
    "database_url_problem",
    "ensure_data_dir",
    "load_settings",
    "mask_database_url",
    "masked",
    "read_option",
    "read_options",
    "secret_values",
]
