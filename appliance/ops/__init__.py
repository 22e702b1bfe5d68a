"""Operating the appliance: backups and restores (:mod:`appliance.ops.backup`), health,
metrics and alerts (:mod:`appliance.ops.observability`), and the operations commands'
bodies (:mod:`appliance.ops.commands`)."""
