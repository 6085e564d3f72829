"""The registered space kinds, and checking a spec against a space, for users and UIs."""

from __future__ import annotations

from archvocab.errors import InvalidSpec
from archvocab.registry import get_kind, kind_names, parse_space
from archvocab.wire import SpaceKindInfo, SpecCheck, SpecChecked


def list_space_kinds() -> list[SpaceKindInfo]:
    infos = []
    for name in kind_names():
        kind = get_kind(name)
        infos.append(
            SpaceKindInfo(
                name=name,
                summary=kind.summary,
                runtimes=list(kind.runtimes),
                layer_scaled_baseline=hasattr(kind.space_type, "baseline"),
                defaults=parse_space({"kind": name}).to_dict(),
            )
        )
    return infos


def check_spec(body: SpecCheck) -> SpecChecked:
    """The spec's id and counts; InvalidSpec (422) naming the field when it is not a valid
    spec of the space's kind or not a member of the space."""
    space = _prefixed("space", lambda: parse_space(body.space))
    kind = get_kind(space.kind)
    spec_kind = body.spec.get("kind", "gpt2")
    if spec_kind != kind.name:
        raise InvalidSpec("spec.kind", f"{spec_kind!r} does not belong to space kind {kind.name!r}")
    spec = _prefixed("spec", lambda: kind.parse_spec(body.spec))
    _prefixed("spec", lambda: space.check_member(spec))
    return SpecChecked(
        kind=kind.name,
        arch_id=spec.arch_id,
        decoder_params=spec.decoder_params(),
        total_params=spec.total_params(),
        member=True,
    )


def _prefixed(where: str, call):
    """Run `call`; an InvalidSpec it raises names its field under `where`."""
    try:
        return call()
    except InvalidSpec as exc:
        raise InvalidSpec(f"{where}.{exc.field}", exc.message) from None
