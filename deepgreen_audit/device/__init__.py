"""The device layer: one module per counter, mapping one-to-one onto its interface (NVML through
pynvml, RAPL through the powercap sysfs tree), with typed errors for a counter a host lacks,
and the instruments that read them at a block boundary.  Trivially faked at its lowest layer
in tests (a fake NVML module, a fake sysfs tree)."""
