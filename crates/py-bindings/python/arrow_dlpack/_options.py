"""The argument types and checks that ``ad.batches`` and ``ad.ray.collate_fn`` share: what
``groups`` and ``sequences`` accept, and column lists read from any iterable but a string."""

from typing import Any, List, Mapping, Sequence, Union

#: What ``groups`` accepts: a mapping from group name to the columns it stacks.
Groups = Mapping[str, Sequence[str]]

#: What ``sequences`` accepts: a mapping from list column to its mode (``"pad"``, ``"pack"``,
#: ``"jagged"``) or to a dict with ``mode``, ``pad_value``, ``max_length``,
#: ``pad_to_multiple_of``, ``padding_side`` and ``truncation_side``.
Sequences = Mapping[str, Union[str, Mapping[str, Any]]]


def _names(argument: str, names: Any) -> List[Any]:
    """``names`` as a list of column names; a lone ``str`` is refused (it would be read as its
    characters), the items are checked by ``_Batches``."""
    if isinstance(names, (str, bytes)):
        raise TypeError(f"{argument} is {type(names).__name__}; expected a list of str")
    return list(names)
