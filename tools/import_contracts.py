"""A contract type import-linter lacks, registered in pyproject.toml's ``[tool.importlinter]``
(``contract_types``) and loaded by ``lint-imports`` through tools/lint_imports.py, which puts this
folder on its path.

``acyclic``: no import cycle between any two modules under ``containers``, a package's
``__init__`` counted as a module of its own. import-linter's ``acyclic_siblings`` compares the
children of one package with each other, so a child importing its parent package while the
package imports the child (``organisms`` and ``organisms.runner``) passed it.
"""
from __future__ import annotations

from importlinter import Contract, ContractCheck, fields, output


class AcyclicContract(Contract):
    """Every import between two modules of ``containers`` (direct, or through deferred imports)
    runs one way only: no module reaches itself again through the modules it imports."""

    type_name = "acyclic"

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        cycles: list[list[str]] = []
        seen: set[frozenset[str]] = set()
        for container in self.containers:
            modules = {container} | set(graph.find_descendants(container))
            for importer in sorted(modules):
                for imported in sorted(set(graph.find_modules_directly_imported_by(importer)) & modules):
                    back = graph.find_shortest_chain(importer=imported, imported=importer)
                    if back is None:
                        continue
                    cycle = [importer, *back]
                    key = frozenset(cycle)
                    if key not in seen:
                        seen.add(key)
                        cycles.append(cycle)
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error(" -> ".join(cycle), bold=False)
            output.new_line()
