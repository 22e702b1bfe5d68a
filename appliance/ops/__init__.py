"""Operating the appliance: backups and restores, health, metrics, alerts (APP-3)."""
