"""The ``ncgeom`` command line: one module per subcommand, dispatched by :mod:`ncgeom.cli.main`."""

__all__: list[str] = []
