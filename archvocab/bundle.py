"""Copy definitions out of Python modules, with everything they use, into one source text.

A definition is a top-level function, class or assignment, copied as its source text (with
the comments just above it). What it uses follows it in: definitions of its own module, and
through its imports those of other modules of ours (`Bundle`'s `redirect` may point them at
stand-ins); imports from other packages become the text's import lines. The modules are
read as files, never imported. `archvocab.standalone` uses this to make the self-contained
PyTorch file.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, field


@dataclass
class SourceModule:
    """One module's top level: each definition's text and the names it uses, its imports."""

    name: str
    text: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # definitions in source order
    uses: dict[str, set[str]] = field(default_factory=dict)
    # bound name -> (module, attribute); attribute None for `import module`
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)


@functools.cache  # a module's source does not change while the process runs
def _parse(name: str) -> SourceModule:
    found = importlib.util.find_spec(name)  # imports the parent packages, never `name` itself
    if found is None or found.origin is None:
        raise LookupError(f"no source for module {name}")
    with open(found.origin, encoding="utf-8") as source:
        lines = source.read().splitlines()
    module, previous_end = SourceModule(name), 0
    for node in ast.parse("\n".join(lines)).body:
        segment = "\n".join(lines[previous_end : node.end_lineno]).strip("\n")
        previous_end = node.end_lineno or previous_end
        if isinstance(node, ast.Import):
            for alias in node.names:
                module.imports[alias.asname or alias.name] = (alias.name, None)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:  # `from __future__` too: the file has its own
                module.imports[alias.asname or alias.name] = (node.module or "", alias.name)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)):
            names = _bound(node)
            module.order += names
            for bound in names:
                module.text[bound] = segment if bound == names[0] else ""
                module.uses[bound] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            raise ValueError(f"{name}: cannot copy a top-level {type(node).__name__}")
    return module


def _bound(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    if len(names) != len(targets):
        raise ValueError(f"cannot copy an assignment to {ast.unparse(node)}")
    return names


class Bundle:
    """The definitions a file needs, with everything they use, across modules.

    `redirect` says which module holds, for the file, what a definition imports from a module
    of ours (the module itself, or a stand-in); imports from other packages are kept.
    """

    def __init__(self, redirect: Callable[[str], str]) -> None:
        self._redirect = redirect
        self._modules: dict[str, SourceModule] = {}
        self._needed: dict[str, set[str]] = {}  # module -> definitions
        self._after: dict[str, set[str]] = {}  # module -> modules it uses definitions of
        self._external: set[tuple[str, str | None, str]] = set()  # (module, attr, bound name)

    def module(self, name: str) -> SourceModule:
        if name not in self._modules:
            self._modules[name] = _parse(name)
        return self._modules[name]

    def need(self, module_name: str, names: Iterable[str]) -> None:
        module = self.module(module_name)
        for name in names:
            if name not in module.text:
                raise LookupError(f"{module_name} defines no {name}")
            if name in self._needed.setdefault(module_name, set()):
                continue
            self._needed[module_name].add(name)
            for used in sorted(module.uses[name]):
                self._resolve(module, used)

    def _resolve(self, module: SourceModule, used: str) -> None:
        if used in module.text:
            self.need(module.name, [used])
        elif used in module.imports:
            source, attr = module.imports[used]
            if source.split(".")[0] != "archvocab":
                self._external.add((source, attr, used))
                return
            if attr is None or attr != used:
                raise ValueError(
                    f"{module.name}: only `from {source} import {used}` can be followed, "
                    "no module imports or renames"
                )
            target = self._redirect(source)
            self._after.setdefault(module.name, set()).add(target)
            self.need(target, [attr])

    def external(self, *imports: tuple[str, str | None, str]) -> None:
        """Imports the glue uses: (module, attribute or None, bound name)."""
        self._external.update(imports)

    def imports(self) -> str:
        """The import lines the needed definitions use: the standard library's, then others."""
        plain = {f"import {m}" for m, attr, _ in self._external if attr is None}
        grouped: dict[str, list[str]] = {}
        for source, attr, bound in self._external:
            if attr is not None:
                grouped.setdefault(source, []).append(
                    attr if attr == bound else f"{attr} as {bound}"
                )
        froms = {f"from {m} import {', '.join(sorted(set(a)))}" for m, a in grouped.items()}
        lines = sorted(
            plain | froms, key=lambda line: (_third_party(line), line.startswith("from"), line)
        )
        first = next((i for i, line in enumerate(lines) if _third_party(line)), len(lines))
        lines[first:first] = [""] if 0 < first < len(lines) else []
        return "from __future__ import annotations\n\n" + "\n".join(lines) + "\n"

    def sections(
        self, renamed: dict[str, dict[str, str]] | None = None, reserved: Set[str] = frozenset()
    ) -> list[str]:
        """Each module's needed definitions in its source order, a module after those whose
        definitions it uses. `renamed` maps a module to its functions that take a new name.
        ValueError when two definitions share a name, one takes a `reserved` name (the
        caller's own), or a renamed function is used in its module (calls keep the old name)."""
        renamed = renamed or {}
        final = {
            (renamed.get(module, {}).get(name, name))
            for module, names in self._needed.items()
            for name in names
        }
        clashes = sorted(reserved & final)
        if clashes or sum(map(len, self._needed.values())) != len(final):
            raise ValueError(f"copied definitions clash by name: {clashes or 'across modules'}")
        out = []
        for name in self._module_order():
            module, names = self._modules[name], renamed.get(name, {})
            callers = [
                d for d in self._needed[name] if d not in names and set(names) & module.uses[d]
            ]
            if callers:
                raise ValueError(f"{name}: {', '.join(sorted(callers))} use a renamed function")
            texts = [module.text[d] for d in module.order if d in self._needed[name]]
            body = "\n\n\n".join(t for t in texts if t)
            for old, new in names.items():
                body = re.sub(rf"^def {old}\(", f"def {new}(", body, flags=re.M)
            out.append(f"# -- from {name.replace('.', '/')}.py {'-' * 40}\n{body}\n\n")
        return out

    def _module_order(self) -> list[str]:
        order: list[str] = []
        entered: set[str] = set()

        def visit(name: str) -> None:
            if name in entered:
                if name not in order:
                    raise ValueError(f"modules use each other's definitions, {name} among them")
                return
            entered.add(name)
            for before in sorted(self._after.get(name, set()) - {name}):
                visit(before)
            order.append(name)

        for name in self._needed:
            visit(name)
        return order


def _third_party(line: str) -> bool:
    return line.split()[1].split(".")[0] not in sys.stdlib_module_names
