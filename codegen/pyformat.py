"""Black's stable style for the modules we generate, without depending on black.

The emitters write one statement per line with black's spacing already; what is left is what
black does to a statement longer than 88 columns (and to a bracketed statement written over
several lines): the right-hand split at the last opening bracket (trying first to omit the
invisible parentheses black puts after `=`, `return`, `if`, ...), the left-hand split for `def`,
and the split at the highest-priority delimiter (one element a line, with a trailing comma after
commas). The rules follow black's linegen.py (`transform_line`, `rhs`, `delimiter_split`,
`left_hand_split`) for the constructs we emit; tests/test_pyformat.py compares with black.
Also done as black does: `**` hugging simple operands, and at most one blank line inside a block.
Strings (triple-quoted C++ or Triton source too) and comment lines are never touched, nor the
statements between `# fmt: off` and `# fmt: on` at module level (an entry-check table laid out
as a table).
"""

from __future__ import annotations

import io
import keyword
import token
import tokenize

LINE_LENGTH = 88

OPENING = {token.LPAR: token.RPAR, token.LSQB: token.RSQB, token.LBRACE: token.RBRACE}
CLOSING = set(OPENING.values())
BRACKETS = set(OPENING) | CLOSING

# black's delimiter priorities (brackets.py): the line splits at the highest one first
COMMA, TERNARY, LOGIC, STRING, COMPARATOR, DOT, COMPREHENSION = 18, 16, 14, 12, 10, 1, 20
MATH = {token.VBAR: 9, token.CIRCUMFLEX: 8, token.AMPER: 7, token.LEFTSHIFT: 6, token.RIGHTSHIFT: 6,
        token.PLUS: 5, token.MINUS: 5, token.STAR: 4, token.SLASH: 4, token.DOUBLESLASH: 4,
        token.PERCENT: 4, token.AT: 4, token.TILDE: 3, token.DOUBLESTAR: 2}
COMPARATORS = {token.LESS, token.GREATER, token.EQEQUAL, token.NOTEQUAL, token.LESSEQUAL,
               token.GREATEREQUAL}
AUGASSIGN = {"=", "+=", "-=", "*=", "/=", "//=", "%=", "@=", "&=", "|=", "^=", "<<=", ">>=", "**="}
# after these the statement's expression gets invisible parentheses (black's normalize_invisible_parens)
PAREN_KEYWORDS = {"return", "if", "elif", "while", "del", "with", "except", "assert"}


class CannotSplit(Exception):
    pass


class Leaf:
    __slots__ = ("type", "value", "prefix", "orig_prefix", "opening", "atom", "comments", "depth")

    def __init__(self, type_: int, value: str, prefix: str = "") -> None:
        self.type, self.value, self.prefix, self.orig_prefix = type_, value, prefix, prefix
        self.opening: Leaf | None = None  # a closing bracket's opening bracket
        self.atom = False  # an opening bracket of a display or a parenthesized expression
        self.comments: list[str] = []
        self.depth = 0  # bracket depth in the line that last tracked it

    def __repr__(self) -> str:
        return f"Leaf({self.value!r})"


def _keyword(leaf: Leaf | None) -> bool:
    return leaf is not None and leaf.type == token.NAME and keyword.iskeyword(leaf.value) \
        and leaf.value not in ("None", "True", "False")


def _operand_end(leaf: Leaf | None) -> bool:
    """Does `leaf` end an operand (so that a following `-`, `*`, `(` is binary or a trailer)?"""
    if leaf is None:
        return False
    if leaf.type == token.NAME:
        return not _keyword(leaf)
    return leaf.type in (token.NUMBER, token.STRING) or (leaf.type in CLOSING and leaf.value != "")


class Line:
    """Leaves of one output line; `track` computes what black's BracketTracker would."""

    def __init__(self, depth: int, leaves: list[Leaf], inside: bool = False, track: str = "all",
                 chained: bool = False) -> None:
        self.depth, self.leaves, self.inside, self.chained = depth, leaves, inside, chained
        self.should_split_rhs = False
        self.delimiters: dict[int, int] = {}  # id(leaf) -> priority of a split after it
        self.magic = False
        self.invisible: list[Leaf] = []
        self.invisible_top: list[Leaf] = []
        if track == "all":
            self._track(leaves)
        elif track == "pairs":  # a head: only brackets closed within it
            self._track_pairs()

    @property
    def is_def(self) -> bool:
        return bool(self.leaves) and self.leaves[0].value == "def"

    def _track(self, leaves: list[Leaf]) -> None:
        depth, stack, previous = 0, [], None
        for_depths: list[int] = []
        lambda_depths: list[int] = []
        for i, leaf in enumerate(leaves):
            if leaf.type in CLOSING and depth == 0:
                continue  # closes a bracket opened on an earlier line
            if for_depths and for_depths[-1] == depth and leaf.value == "in" and leaf.type == token.NAME:
                depth -= 1
                for_depths.pop()
            if lambda_depths and lambda_depths[-1] == depth and leaf.type == token.COLON:
                depth -= 1
                lambda_depths.pop()
            if leaf.type in CLOSING:
                depth -= 1
                stack.pop()
                if not leaf.value:
                    self.invisible.append(leaf)
                if self._magic_at(leaf, leaves, i):
                    self.magic = True
            leaf.depth = depth
            if depth == 0:
                before = _priority_before(leaf, previous, leaves, i)
                if before and previous is not None:
                    self.delimiters[id(previous)] = before
                elif leaf.type == token.COMMA:
                    self.delimiters[id(leaf)] = COMMA
            if leaf.type in OPENING:
                stack.append(leaf)
                if not leaf.value:
                    self.invisible.append(leaf)
                    if depth == 0:
                        self.invisible_top.append(leaf)
                depth += 1
            previous = leaf
            if leaf.type == token.NAME and leaf.value == "lambda":
                depth += 1
                lambda_depths.append(depth)
            if leaf.type == token.NAME and leaf.value == "for":
                depth += 1
                for_depths.append(depth)

    def _track_pairs(self) -> None:
        position = {id(leaf): i for i, leaf in enumerate(self.leaves)}
        for i, leaf in enumerate(self.leaves):
            if leaf.type in CLOSING and leaf.opening is not None and id(leaf.opening) in position:
                if self._magic_at(leaf, self.leaves, i):
                    self.magic = True
                if not leaf.value:
                    self.invisible += [leaf.opening, leaf]

    @staticmethod
    def _magic_at(closing: Leaf, leaves: list[Leaf], i: int) -> bool:
        """A trailing comma that makes black keep the brackets exploded (not a one-tuple's)."""
        if i == 0 or leaves[i - 1].type != token.COMMA:
            return False
        if closing.type == token.RBRACE:
            return True
        opening = closing.opening
        one_tuple = closing.type == token.RPAR and opening is not None and opening.atom
        subscript = closing.type == token.RSQB and opening is not None and not opening.atom
        if one_tuple or subscript:
            return _commas_between(opening, closing, leaves) >= 2
        return True

    def max_priority(self, exclude: Leaf | None = None) -> int:
        values = [p for k, p in self.delimiters.items() if exclude is None or k != id(exclude)]
        if not values:
            raise CannotSplit("no delimiters")
        return max(values)

    def count(self, priority: int) -> int:
        return sum(1 for p in self.delimiters.values() if p == priority)

    def lengths(self, reverse: bool = False):
        """(index, leaf, length with its comments), as black's enumerate_with_length."""
        order = range(len(self.leaves) - 1, -1, -1) if reverse else range(len(self.leaves))
        for i in order:
            leaf = self.leaves[i]
            if "\n" in leaf.value:
                return
            yield i, leaf, len(leaf.prefix) + len(leaf.value) + sum(len(c) for c in leaf.comments)

    def __str__(self) -> str:
        if not self.leaves:
            return ""
        first = self.leaves[0]
        text = first.prefix + "    " * self.depth + first.value
        text += "".join(leaf.prefix + leaf.value for leaf in self.leaves[1:])
        return text + "".join("  " + c for leaf in self.leaves for c in leaf.comments)

    def __bool__(self) -> bool:
        return bool(self.leaves)


def _commas_between(opening: Leaf, closing: Leaf, leaves: list[Leaf]) -> int:
    """Commas directly inside the pair (black's is_one_sequence_between: fewer than two)."""
    start = next(i for i, leaf in enumerate(leaves) if leaf is opening)
    depth, commas = 0, 0
    for leaf in leaves[start + 1:]:
        if leaf is closing:
            break
        if leaf.type in OPENING:
            depth += 1
        elif leaf.type in CLOSING:
            depth -= 1
        elif depth == 0 and leaf.type == token.COMMA:
            commas += 1
    return commas


def _unary(leaf: Leaf, previous: Leaf | None) -> bool:
    return leaf.type in (token.PLUS, token.MINUS, token.TILDE, token.STAR, token.DOUBLESTAR) \
        and not _operand_end(previous)


def _priority_before(leaf: Leaf, previous: Leaf | None, leaves: list[Leaf], i: int) -> int:
    """Priority of a split just before `leaf` (black's is_split_before_delimiter)."""
    if leaf.type == token.DOT and previous is not None and previous.type in CLOSING:
        return DOT
    if leaf.type in MATH and not _unary(leaf, previous):
        return MATH[leaf.type]
    if leaf.type in COMPARATORS:
        return COMPARATOR
    if leaf.type == token.STRING and previous is not None and previous.type == token.STRING:
        return STRING
    if leaf.type != token.NAME or previous is None:
        return 0
    value = leaf.value
    if value == "for":
        return COMPREHENSION
    if value == "if":
        # a comprehension's `if` follows its `for` at the same depth; else a conditional expression
        same = [x for x in leaves[:i] if x.depth == leaf.depth]
        return COMPREHENSION if any(x.value == "for" and x.type == token.NAME for x in same) else TERNARY
    if value == "else":
        return TERNARY
    if value == "is":
        return COMPARATOR
    if value == "in" and not (previous.type == token.NAME and previous.value == "not"):
        return COMPARATOR
    if value == "not" and i + 1 < len(leaves) and leaves[i + 1].value == "in" \
            and not (previous.type == token.NAME and previous.value == "is"):
        return COMPARATOR
    if value in ("and", "or"):
        return LOGIC
    return 0


def _short(line: Line, limit: int = LINE_LENGTH) -> bool:
    text = str(line)
    return "\n" not in text and len(text) <= limit


# -- transforms (black's linegen.py) ---------------------------------------------------------
def transform_line(line: Line, force_parens: bool = False) -> list[Line]:
    if not line.magic and not line.should_split_rhs and _short(line):
        return [line]
    if line.is_def:
        transforms = [left_hand_split]
    elif line.inside:
        transforms = [delimiter_split, rhs]
    else:
        transforms = [rhs]
    for transform in transforms:
        try:
            return _run(line, transform, force_parens)
        except CannotSplit:
            continue
    return [line]


def _run(line: Line, transform, force_parens: bool) -> list[Line]:
    text = str(line)
    result: list[Line] = []
    for piece in transform(line, force_parens):
        if str(piece) == text:
            raise CannotSplit("unchanged")
        result.extend(transform_line(piece, force_parens))
    if (transform is not rhs or force_parens or not line.invisible
            or any(b.value for b in line.invisible_top) or _short(result[0])):
        return result
    # black's second opinion: keep the optional parentheses when that makes every line fit
    second = _run(_clone(line), transform, True)
    return second if all(_short(x) for x in second) else result


def _clone(line: Line) -> Line:
    copies: dict[int, Leaf] = {}
    leaves = []
    for leaf in line.leaves:
        new = Leaf(leaf.type, leaf.value, leaf.orig_prefix)
        new.atom, new.comments = leaf.atom, list(leaf.comments)
        if leaf.opening is not None:
            new.opening = copies.get(id(leaf.opening))
        copies[id(leaf)] = new
        leaves.append(new)
    return Line(line.depth, leaves, line.inside, chained=line.chained)


def _build(leaves: list[Leaf], original: Line, opening: Leaf, part: str) -> Line:
    if part == "body":
        if original.is_def and opening.value == "(" and leaves and not _has_top_comma(leaves):
            leaves = leaves + [Leaf(token.COMMA, ",")]  # a lone parameter gets one too
        result = Line(original.depth + 1, leaves, inside=True)
        if leaves and opening.value in ("", "(", "[", "{"):
            try:
                last = leaves[-1]
                top = result.max_priority(exclude=last if last.type == token.COMMA else None)
            except CannotSplit:
                top = 0
            result.should_split_rhs = top == COMMA and (last.type == token.COMMA or opening.atom)
        return result
    return Line(original.depth, leaves, track="pairs" if part == "head" else "none")


def _has_top_comma(leaves: list[Leaf]) -> bool:
    """A comma of the parameter list itself (not inside an annotation or default)."""
    depth = 0
    for leaf in leaves:
        depth += leaf.type in OPENING
        depth -= leaf.type in CLOSING
        if depth == 0 and leaf.type == token.COMMA:
            return True
    return False


def _check(head: Line, body: Line, tail: Line) -> None:
    tail_len = len(str(tail).strip())
    if not body and (tail_len == 0 or tail_len < 3):
        raise CannotSplit("not worth it")


def left_hand_split(line: Line, force_parens: bool) -> list[Line]:
    """`def f(` / parameters / `) -> T:`."""
    head, body, tail = [], [], []
    current, opening = head, None
    for leaf in line.leaves:
        if current is body and leaf.type in CLOSING and leaf.opening is opening:
            current = tail if body else head
        current.append(leaf)
        if current is head and leaf.type == token.LPAR and opening is None:
            opening, current = leaf, body
    if opening is None or not tail:
        raise CannotSplit("no brackets")
    lines = (_build(head, line, opening, "head"), _build(body, line, opening, "body"),
             _build(tail, line, opening, "tail"))
    _check(*lines)
    return [x for x in lines if x]


def _first_rhs(line: Line, omit: set[int]) -> tuple[Line, Line, Line, Leaf, Leaf]:
    head, body, tail = [], [], []
    current, opening, closing = tail, None, None
    for leaf in reversed(line.leaves):
        if current is body and leaf is opening:
            current = head if body else tail
        current.append(leaf)
        if current is tail and leaf.type in CLOSING and id(leaf) not in omit:
            opening, closing, current = leaf.opening, leaf, body
    if not (opening and closing and head):
        raise CannotSplit("no brackets")
    head.reverse(), body.reverse(), tail.reverse()
    parts = (_build(head, line, opening, "head"), _build(body, line, opening, "body"),
             _build(tail, line, opening, "tail"))
    _check(*parts)
    return (*parts, opening, closing)


def rhs(line: Line, force_parens: bool) -> list[Line]:
    """Split at the last opening bracket, first trying to keep trailers that fit (black's
    right_hand_split_with_omits)."""
    first = None
    offsets, at = {}, 4 * line.depth
    for leaf in line.leaves:
        offsets[id(leaf)] = at
        at += len(leaf.prefix) + len(leaf.value)
    for omit in _trailers_to_omit(line):
        if omit:
            target = next((x.opening for x in reversed(line.leaves)
                           if x.type in CLOSING and id(x) not in omit), None)
            if target is not None and target.value and offsets.get(id(target), 0) > LINE_LENGTH:
                continue
        lines = _rhs_split(line, omit, force_parens)
        if first is None and not omit:
            first = lines
        if _short(lines[0]):
            return lines
    return first if first is not None else _rhs_split(line, set(), force_parens)


def _trailers_to_omit(line: Line):
    omit: set[int] = set()
    if not line.magic:
        yield set(omit)
    length = 4 * line.depth
    opening = closing = None
    inner: set[int] = set()
    for i, leaf, leaf_length in line.lengths(reverse=True):
        length += leaf_length
        if length > LINE_LENGTH or leaf_length > len(leaf.value) + len(leaf.prefix):
            break  # too long, or a comment
        prev = line.leaves[i - 1] if i > 0 else None
        if opening is not None:
            if leaf is opening:
                opening = None
            elif leaf.type in CLOSING:
                if prev is not None and prev.type == token.COMMA and leaf.opening is not None \
                        and not _one_sequence(leaf, line.leaves):
                    break
                inner.add(id(leaf))
        elif leaf.type in CLOSING:
            if prev is not None and prev.type in OPENING:
                inner.add(id(leaf))
                continue
            if closing is not None:
                omit.add(id(closing))
                omit |= inner
                inner.clear()
                yield set(omit)
            if prev is not None and prev.type == token.COMMA and leaf.opening is not None \
                    and not _one_sequence(leaf, line.leaves):
                break
            if leaf.value:
                opening, closing = leaf.opening, leaf


def _one_sequence(closing: Leaf, leaves: list[Leaf]) -> bool:
    """black's is_one_sequence_between: a one-tuple's parentheses (only those count)."""
    if closing.type != token.RPAR or closing.opening not in leaves:
        return False
    return closing.opening.atom and _commas_between(closing.opening, closing, leaves) < 2


def _rhs_split(line: Line, omit: set[int], force_parens: bool) -> list[Line]:
    return _maybe_omit_optional_parens(_first_rhs(line, omit), line, omit, force_parens)


def _maybe_omit_optional_parens(split, line: Line, omit: set[int], force_parens: bool) -> list[Line]:
    head, body, tail, opening, closing = split
    if (not force_parens and opening.type == token.LPAR and not opening.value
            and closing.type == token.RPAR and not closing.value and _can_omit_parens(split)):
        omit = {id(closing), *omit}
        try:
            other = _first_rhs(line, omit)
            if _prefer_omitting(other, split):
                return _maybe_omit_optional_parens(other, line, omit, force_parens)
        except CannotSplit:
            if line.chained:
                pass
            elif not _can_be_split(body) and not _short(body):
                raise
    if opening.type == token.LPAR and not opening.value:  # black's ensure_visible: now real
        opening.value, closing.value = "(", ")"
    return [x for x in (head, body, tail) if x]


def _can_be_split(line: Line) -> bool:
    leaves = line.leaves
    if len(leaves) < 2:
        return False
    if leaves[0].type == token.STRING and leaves[1].type == token.DOT:
        calls = dots = 0
        following = leaves[-1]
        for leaf in leaves[-2::-1]:
            if leaf.type in OPENING:
                if following.type not in CLOSING:
                    return False
                calls += 1
            elif leaf.type == token.DOT:
                dots += 1
            elif leaf.type == token.NAME:
                if not (following.type == token.DOT or following.type in OPENING):
                    return False
            elif leaf.type not in CLOSING:
                return False
            if dots > 1 and calls > 1:
                return False
            following = leaf
    return True


def _can_omit_parens(split) -> bool:
    """May the invisible parentheses stay invisible (black's can_omit_invisible_parens)?"""
    body = split[1]
    if not body.delimiters:
        return True
    top = body.max_priority()
    if body.count(top) > 1:
        return False
    if top == DOT:
        return True
    first, second = body.leaves[0], body.leaves[1]
    if first.type in OPENING and second.type not in CLOSING and _can_omit_opening(body, first):
        return True
    penultimate, last = body.leaves[-2], body.leaves[-1]
    if last.type in (token.RPAR, token.RBRACE) or (last.type == token.RSQB and last.opening is not None
                                                     and last.opening.atom):
        if penultimate.type in OPENING:
            return False
        return _can_omit_closing(body, last)
    return False


def _can_omit_opening(line: Line, first: Leaf) -> bool:
    remainder, length, index = False, 4 * line.depth, -1
    for index, leaf, leaf_length in line.lengths():
        if leaf.type in CLOSING and leaf.opening is first:
            remainder = True
        if remainder:
            length += leaf_length
            if length > LINE_LENGTH:
                return False
            if leaf.type in OPENING:
                remainder = False
    return len(line.leaves) == index + 1


def _can_omit_closing(line: Line, last: Leaf) -> bool:
    length, seen_other = 4 * line.depth, False
    for _, leaf, leaf_length in line.lengths():
        length += leaf_length
        if leaf is last.opening:
            if seen_other or length <= LINE_LENGTH:
                return True
        elif leaf.type in OPENING:
            seen_other = True
    return False


def _prefer_omitting(other, split) -> bool:
    """black's _prefer_split_rhs_oop_over_rhs."""
    head, other_head = split[0], other[0]
    if not (len(head.leaves) >= 2 and head.leaves[-2].type == token.EQUAL):
        return True
    if not any(leaf.type in BRACKETS for leaf in head.leaves[:-1]):
        return True
    if not _short(head, LINE_LENGTH - 1):
        return True
    if head.magic:
        return True
    equals = sum(leaf.type == token.EQUAL for leaf in head.leaves)
    if equals > 1 and equals > sum(leaf.type == token.EQUAL for leaf in other_head.leaves):
        return False
    for leaf in reversed(other_head.leaves):
        if leaf.type == token.EQUAL:
            break
        if leaf.type in CLOSING:
            return True
    return any(leaf.type == token.EQUAL for leaf in other_head.leaves) and _short(other_head)


def delimiter_split(line: Line, force_parens: bool) -> list[Line]:
    """One line per element at the highest-priority delimiter; a trailing comma after commas."""
    if not line.leaves:
        raise CannotSplit("empty")
    top = line.max_priority(exclude=line.leaves[-1])
    if top == DOT and line.count(DOT) == 1:
        raise CannotSplit("a single attribute access stays on its owner")
    lines, current = [], []
    for leaf in line.leaves:
        current.append(leaf)
        if line.delimiters.get(id(leaf)) == top:
            lines.append(current)
            current = []
    if current:
        if top == COMMA and current[-1].type != token.COMMA:
            current.append(Leaf(token.COMMA, ","))
        lines.append(current)
    result = []
    for leaves in lines:
        leaves[0].prefix = ""
        result.append(Line(line.depth, leaves, inside=line.inside))
    return result


# -- statements -------------------------------------------------------------------------------
def _leaves(tokens: list[tokenize.TokenInfo]) -> tuple[list[Leaf], str | None]:
    """Leaves of a logical line with black's spacing, and its trailing comment."""
    leaves: list[Leaf] = []
    comment = None
    previous = None
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            comment = tok.string
            continue
        kind = tok.exact_type if tok.type == tokenize.OP else tok.type
        if previous is None:
            prefix = ""
        elif previous.end[0] == tok.start[0]:
            prefix = tok.line[previous.end[1]:tok.start[1]]
        else:  # joined from a bracketed statement written over several lines
            prefix = "" if leaves[-1].type in OPENING or kind in CLOSING or kind == token.COMMA else " "
        leaves.append(Leaf(kind, tok.string, prefix))
        previous = tok
    stack: list[Leaf] = []
    for i, leaf in enumerate(leaves):
        if leaf.type in OPENING:
            leaf.atom = leaf.type == token.LBRACE or not _operand_end(leaves[i - 1] if i else None)
            stack.append(leaf)
        elif leaf.type in CLOSING:
            leaf.opening = stack.pop()
    return leaves, comment


def _matching(leaves: list[Leaf], i: int) -> int:
    closing = next(j for j in range(i + 1, len(leaves)) if leaves[j].opening is leaves[i])
    return closing


def _wrap(leaves: list[Leaf], start: int, end: int) -> None:
    """Invisible parentheses around leaves[start:end] (black's normalize_invisible_parens)."""
    if start >= end:
        return
    first = leaves[start]
    if first.type == token.LPAR and _matching(leaves, start) == end - 1:
        return  # already parenthesized
    if first.type == token.STRING and "\n" in first.value:
        return
    opening, closing = Leaf(token.LPAR, "", first.prefix), Leaf(token.RPAR, "")
    first.prefix = ""
    opening.atom, closing.opening = True, opening
    leaves.insert(end, closing)
    leaves.insert(start, opening)


def _top_level(leaves: list[Leaf]) -> list[int]:
    depth, out = 0, []
    for i, leaf in enumerate(leaves):
        if leaf.type in CLOSING:
            depth -= 1
        if depth == 0:
            out.append(i)
        if leaf.type in OPENING:
            depth += 1
    return out


def _statement(leaves: list[Leaf], comment: str | None, depth: int) -> Line:
    chained = False
    first = leaves[0].value if leaves[0].type == token.NAME else ""
    top = _top_level(leaves)
    lambda_free = [i for i in top if not any(leaves[j].value == "lambda" for j in top if j < i)]
    comma = next((i for i in top if leaves[i].type == token.COMMA), None)
    if first == "assert" and comma is not None:  # `assert test, message`: each on its own (one would be a tuple)
        _wrap(leaves, comma + 1, len(leaves))
        _wrap(leaves, 1, comma)
    elif first in PAREN_KEYWORDS:
        end = len(leaves) - 1 if leaves[-1].type == token.COLON else len(leaves)
        _wrap(leaves, 1, end)
    elif first == "for":
        in_at = next(i for i in top if leaves[i].value == "in" and leaves[i].type == token.NAME)
        _wrap(leaves, in_at + 1, len(leaves) - 1)
        _wrap(leaves, 1, in_at)
    elif first not in ("def", "class", "raise", "import", "from") and not leaves[0].type == token.AT:
        equals = [i for i in lambda_free if leaves[i].value in AUGASSIGN]
        chained = len(equals) > 1
        for k in reversed(range(len(equals))):  # right to left: insertions keep earlier indices
            end = equals[k + 1] if k + 1 < len(equals) else len(leaves)
            _wrap(leaves, equals[k] + 1, end)
        if equals and any(leaves[i].type == token.COMMA for i in top if i < equals[0]):
            _wrap(leaves, 0, equals[0])  # a tuple target
    if comment is not None:
        last = leaves[-1]
        if last.type == token.RPAR and not last.value and leaves[-3] is last.opening:
            last = leaves[-2]  # `x = 1  # c`: the comment stays with the value
        last.comments.append(comment)
    return Line(depth, leaves, chained=chained)


def _hug_power(leaves: list[Leaf]) -> None:
    """`x**2`: black drops the spaces around `**` between simple operands."""

    def simple_before(i: int) -> bool:
        if leaves[i].type not in (token.NAME, token.NUMBER):
            return False
        chain, disallowed = [], False
        while i >= 0:
            chain.append(leaves[i])
            disallowed = disallowed or leaves[i].type in (token.RPAR, token.RSQB)
            if len(chain) >= 2:
                past, now = chain[-2], chain[-1]
                if past.type == token.NAME:
                    chained = now.type == token.DOT
                elif past.type in (token.RPAR, token.RSQB):
                    chained = now.type in (token.RSQB, token.RPAR)
                elif past.type in (token.LPAR, token.LSQB):
                    chained = now.type in (token.NAME, token.LPAR, token.LSQB)
                else:
                    chained = False
                if not chained:
                    return not disallowed
            i -= 1
        return True

    def simple_after(i: int) -> bool:
        if leaves[i].type in (token.PLUS, token.MINUS, token.TILDE) and i + 1 < len(leaves) \
                and leaves[i + 1].type in (token.NAME, token.NUMBER):
            i += 1
        elif leaves[i].type not in (token.NAME, token.NUMBER):
            return False
        while i < len(leaves):
            if leaves[i].type in (token.LPAR, token.LSQB):
                return False
            if leaves[i].type not in (token.NAME, token.DOT) or leaves[i].value == "for":
                return True
            i += 1
        return True

    for i in range(1, len(leaves) - 1):
        if leaves[i].type == token.DOUBLESTAR and leaves[i - 1].value != "lambda" \
                and simple_before(i - 1) and simple_after(i + 1):
            leaves[i].prefix = leaves[i + 1].prefix = ""
            leaves[i].orig_prefix = leaves[i + 1].orig_prefix = ""


def _format_statement(tokens: list[tokenize.TokenInfo]) -> list[str] | None:
    """The statement's lines in black's style, or None to keep it as written."""
    code = [t for t in tokens if t.type != tokenize.COMMENT]
    if any(t.type == tokenize.STRING and t.start[0] != t.end[0] for t in code):
        return None  # a multi-line string: black never splits around it differently than we write
    comments = [i for i, t in enumerate(tokens) if t.type == tokenize.COMMENT]
    if comments and comments != [len(tokens) - 1]:
        return None  # a comment inside the statement
    if code[0].type == tokenize.STRING:
        return None  # a docstring
    leaves, comment = _leaves(tokens)
    _hug_power(leaves)
    depth = code[0].start[1] // 4
    line = _statement(leaves, comment, depth)
    return [str(x) for x in transform_line(line)]


def _merge_fstrings(tokens: list[tokenize.TokenInfo], text_lines: list[str]) -> list[tokenize.TokenInfo]:
    """One STRING token per f-string (Python 3.12 splits them into parts)."""
    start_type = getattr(tokenize, "FSTRING_START", None)
    if start_type is None:
        return tokens
    out, depth, first = [], 0, None
    for tok in tokens:
        if tok.type == start_type:
            depth += 1
            first = first or tok
            continue
        if depth:
            if tok.type == tokenize.FSTRING_END:
                depth -= 1
                if depth == 0:
                    if first.start[0] == tok.end[0]:
                        value = text_lines[first.start[0] - 1][first.start[1]:tok.end[1]]
                    else:
                        value = "\n" * (tok.end[0] - first.start[0] + 1)  # a multi-line f-string
                    out.append(tokenize.TokenInfo(tokenize.STRING, value, first.start, tok.end, first.line))
                    first = None
            continue
        out.append(tok)
    return out


def format_python(text: str) -> str:
    """`text` (a whole module) with black's splitting of long statements and blank lines."""
    lines = text.splitlines()
    tokens = _merge_fstrings(list(tokenize.generate_tokens(io.StringIO(text).readline)), lines)
    replace: dict[int, tuple[int, list[str]]] = {}  # first row -> (last row, new lines)
    blank_ok: set[int] = set()  # rows (1-based) that are blank lines outside strings
    statement: list[tokenize.TokenInfo] = []
    verbatim = False  # between `# fmt: off` and `# fmt: on` (module level), as black leaves it
    for tok in tokens:
        if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER):
            continue
        if tok.type == tokenize.COMMENT and tok.start[1] == 0 and tok.string in ("# fmt: off", "# fmt: on"):
            verbatim = tok.string == "# fmt: off"
        if tok.type == tokenize.NL:
            if not statement and not tok.line.strip():
                blank_ok.add(tok.start[0])
            if not any(t.type != tokenize.COMMENT for t in statement):
                statement = []
            continue
        if tok.type == tokenize.NEWLINE:
            if statement and not verbatim:
                first, last = statement[0].start[0], tok.start[0]
                new = _format_statement(statement)
                if new is not None and new != lines[first - 1:last]:
                    replace[first] = (last, new)
            statement = []
            continue
        statement.append(tok)
    out: list[str] = []
    row, blanks = 1, 0
    while row <= len(lines):
        if row in replace:
            last, new = replace[row]
            out.extend(new)
            row, blanks = last + 1, 0
            continue
        line = lines[row - 1]
        if row in blank_ok:
            blanks += 1
            # black keeps at most two blank lines at module level and one inside a block
            nxt = next((x for x in lines[row:] if x.strip()), "")
            if blanks > (1 if nxt[:1] == " " else 2):
                row += 1
                continue
        else:
            blanks = 0
        out.append(line)
        row += 1
    return "\n".join(out) + "\n"
