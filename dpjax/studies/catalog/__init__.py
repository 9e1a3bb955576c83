"""Study definitions, one module per mechanism family; imported by ``registry.studies()``."""
