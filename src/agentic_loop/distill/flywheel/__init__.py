"""The flywheel service: rounds, canary ramp, monitors and a status page, over one registry."""
