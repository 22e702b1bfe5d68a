"""The proxy we tell users to put in front (EDGE-1, IMP-2): its configuration, made from
the settings in force so the two cannot disagree (``appliance proxy-config``)."""
