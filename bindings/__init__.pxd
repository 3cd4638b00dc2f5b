# Marker so that `from bindings cimport sysio` resolves.  Declarations only.
