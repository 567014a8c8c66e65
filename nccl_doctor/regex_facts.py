"""What a regex can tell apart, read from its parsed form.

``digit_blind(rx)``: the regex treats every ASCII digit alike (no digit literal, no class holding
some digits but not all, no backreference). On two ASCII strings that differ only in which digits
stand where (same length, same non-digit characters), such a regex then runs the same steps and
gives the same match and group spans; so a match found on one line can be reused for every line of
the same *digit shape* (digits replaced by ``0``), reading the field values from the new line at
the old spans. Thousands of ranks print lines that differ only in numbers (step lines, watchdog
timeouts, SeqNums), which is what the fast scan path memoises on.
"""

from __future__ import annotations

import re
from re import _constants as C  # noqa: N812 - the sre opcode names, as the stdlib parser uses them
from re import _parser

_DIGITS = frozenset(range(ord("0"), ord("9") + 1))
_HAS_ALL = {C.CATEGORY_DIGIT, C.CATEGORY_WORD, C.CATEGORY_UNI_DIGIT, C.CATEGORY_UNI_WORD, C.CATEGORY_NOT_SPACE,
            C.CATEGORY_UNI_NOT_SPACE, C.CATEGORY_LOC_WORD}
_HAS_NONE = {C.CATEGORY_NOT_DIGIT, C.CATEGORY_NOT_WORD, C.CATEGORY_UNI_NOT_DIGIT, C.CATEGORY_UNI_NOT_WORD,
             C.CATEGORY_SPACE, C.CATEGORY_UNI_SPACE, C.CATEGORY_LOC_NOT_WORD, C.CATEGORY_LINEBREAK,
             C.CATEGORY_UNI_LINEBREAK}
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", C.MAX_REPEAT))
#: bytes.translate table: every ASCII digit becomes "0".
DIGIT_SHAPE = bytes(0x30 if 0x30 <= b <= 0x39 else b for b in range(256))


def digit_blind(rx: re.Pattern[str]) -> bool:
    """True when ``rx`` cannot tell one ASCII digit from another (see the module docstring)."""
    try:
        return _blind(_parser.parse(rx.pattern, rx.flags))
    except Exception:  # an unknown construct in a newer Python: claim nothing
        return False


def _class_digits(items) -> frozenset | None:
    """The ASCII digits a character class accepts, None when it holds something not understood."""
    acc: set[int] = set()
    negate = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            if av in _DIGITS:
                acc.add(av)
        elif op is C.RANGE:
            lo, hi = av
            acc |= {d for d in _DIGITS if lo <= d <= hi}
        elif op is C.CATEGORY:
            if av in _HAS_ALL:
                acc |= _DIGITS
            elif av not in _HAS_NONE:
                return None
        else:
            return None
    return frozenset(_DIGITS - acc if negate else acc)


def _blind(seq) -> bool:
    for op, av in seq:
        if op in (C.LITERAL, C.NOT_LITERAL):
            if av in _DIGITS:
                return False
        elif op is C.IN:
            got = _class_digits(av)
            if got is None or (got and got != _DIGITS):
                return False
        elif op in (C.ANY, C.AT):
            continue
        elif op is C.SUBPATTERN:
            if not _blind(av[-1]):
                return False
        elif op in _REPEATS:
            if not _blind(av[2]):
                return False
        elif op is C.BRANCH:
            if not all(_blind(b) for b in av[1]):
                return False
        elif op in (C.ASSERT, C.ASSERT_NOT):
            if not _blind(av[1]):
                return False
        elif op is getattr(C, "ATOMIC_GROUP", None):
            if not _blind(av):
                return False
        elif op is C.GROUPREF_EXISTS:
            if not _blind(av[1]) or (av[2] is not None and not _blind(av[2])):
                return False
        else:  # backreferences (they compare text) and anything not understood
            return False
    return True
