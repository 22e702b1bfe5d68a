"""phonenumbers loads each region's metadata by module name: bundle those (and the
short-number data), not the geocoder/carrier/timezone data the appliance never uses.
Overrides the contrib hook, which collects every submodule (~45 MB, slow to build)."""

from PyInstaller.utils.hooks import collect_submodules

hiddenimports = collect_submodules("phonenumbers.data") + collect_submodules(
    "phonenumbers.shortdata")
