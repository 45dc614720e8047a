"""Moses `tokenizer.perl -l LANG` as it was at mosesdecoder 59bad94f (2017-06-12, the last commit
before the paper), ported rule for rule with perl's semantics: the tokenization of the paper's
tokenized BLEU (tensor2tensor's get_ende_bleu.sh).

What makes a port exact, and so is done here, not approximated:
- perl's character classes are Unicode properties, taken from Unicode itself, never from typed
  tables: `\\p{IsAlpha}` is Alphabetic, `\\p{IsAlnum}` Alphabetic or Nd, `\\p{IsN}` the general
  category N, `\\p{IsLower}` Lowercase, and `\\s` White_Space. They follow **Unicode 14.0**, the
  version of perl 5.36 and of Python 3.11's `unicodedata`: a property of the `regex` package
  (whose Unicode is later) holds for a code point only if Unicode 14 assigned it
  (`unicode_class`; tests/test_protocol.py compares every code point with perl's answer and
  with `unicodedata`);
- perl's `\\s` is not Python's: it leaves U+001C..U+001F, which the tokenizer then deletes with
  the other control characters (`sehr\\x1cgutes` is `sehrgutes`);
- `split(/\\s/)` splits at every single white space (two spaces make an empty word between them,
  which the next-word rule for a final period sees) and drops trailing empty fields;
- a line of white space only (or empty) is printed as it is, untokenized;
- the nonbreaking prefixes are Moses' own files (`nonbreaking_prefixes/`), read as
  `load_prefixes` reads them.
Not ported: the options the protocol does not use (-a, -x, -penn, -no-escape, protected patterns,
threads). Later Moses (2018) splits a line-final period whatever the word before it; 2017's does
not for a nonbreaking prefix ("Nr." at the end of a line stays whole), and neither do we.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from importlib import resources

UNICODE_VERSION = unicodedata.unidata_version  # 14.0.0 on Python 3.11, as in perl 5.36
PREFIX_DIR = "nonbreaking_prefixes"
MARKS_FILE = f"alphabetic_marks-{UNICODE_VERSION}.txt"
LETTERS = ("Lu", "Ll", "Lt", "Lm", "Lo", "Nl")

# what each perl class of tokenizer.perl stands for, for messages and tests
PROPERTIES = {
    "IsAlpha": "Alphabetic",
    "IsAlnum": "Alphabetic or General_Category=Nd",
    "IsN": "General_Category=N",
    "IsLower": "Lowercase",
    "s": "White_Space",
}


def alphabetic_marks() -> frozenset[int]:
    """The marks (Mn, Mc) with the Alphabetic property (PropList's Other_Alphabetic) in Unicode
    UNICODE_VERSION: the one part of Alphabetic that Python's unicodedata does not hold. Read from
    the package's file (ranges as in the UCD), which `marks_from_perl` writes from perl's own tables."""
    name = MARKS_FILE
    path = resources.files("aiayn.evaluation").joinpath(name)
    if not path.is_file():
        raise RuntimeError(
            f"{name} is missing from the package: Python's Unicode is {UNICODE_VERSION}; "
            "write that version's file with aiayn.evaluation.moses.marks_from_perl"
        )
    out = set()
    for line in path.read_text(encoding="ascii").splitlines():
        line = line.split("#")[0].strip()
        if line:
            a, _, b = line.partition("..")
            out.update(range(int(a, 16), int(b or a, 16) + 1))
    return frozenset(out)


@functools.cache
def _classes() -> dict[str, frozenset[int]]:
    marks = alphabetic_marks()
    sets: dict[str, set[int]] = {k: set() for k in PROPERTIES}
    for cp in range(0x110000):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in LETTERS or ch.islower() or ch.isupper() or cp in marks:
            sets["IsAlpha"].add(cp)
            sets["IsAlnum"].add(cp)
        if cat[0] == "N":
            sets["IsN"].add(cp)
            if cat == "Nd":
                sets["IsAlnum"].add(cp)
        if ch.islower():  # Python's islower of one character is the Lowercase property
            sets["IsLower"].add(cp)
        if ch.isspace() and not 0x1C <= cp <= 0x1F:  # Python's isspace adds U+001C..U+001F to White_Space
            sets["s"].add(cp)
    return {k: frozenset(v) for k, v in sets.items()}


def code_points(name: str) -> frozenset[int]:
    """The code points perl's class `name` (a key of PROPERTIES) holds under Unicode UNICODE_VERSION."""
    return _classes()[name]


def ranges(points) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for cp in sorted(points):
        if out and cp == out[-1][1] + 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return [(a, b) for a, b in out]


@functools.cache
def unicode_class(name: str) -> str:
    """`re` class body (no brackets) of perl's class `name`."""
    esc = lambda cp: f"\\U{cp:08x}"  # noqa: E731
    return "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges(code_points(name)))


PERL_DUMP = r"""
binmode(STDOUT);
for my $c (0..0x10FFFF) {
    next if $c >= 0xD800 && $c <= 0xDFFF;
    my $ch = chr($c); utf8::upgrade($ch);   # as tokenizer.perl's strings, read through :utf8
    my $m = "";
    $m .= "a" if $ch =~ /\p{IsAlpha}/; $m .= "l" if $ch =~ /\p{IsAlnum}/; $m .= "n" if $ch =~ /\p{IsN}/;
    $m .= "w" if $ch =~ /\p{IsLower}/; $m .= "s" if $ch =~ /\s/;
    printf("%x %s\n", $c, $m) if $m ne "";
}
"""


def perl_classes(perl: str = "perl") -> tuple[str, dict[str, frozenset[int]]]:
    """perl's own answer: its Unicode version and, for every code point, which of tokenizer.perl's
    classes hold it."""
    import subprocess

    version = subprocess.run(
        [perl, "-MUnicode::UCD", "-e", "print Unicode::UCD::UnicodeVersion()"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dump = subprocess.run([perl, "-e", PERL_DUMP], capture_output=True, text=True, check=True).stdout
    letters = dict(zip("alnws", PROPERTIES))
    sets: dict[str, set[int]] = {k: set() for k in PROPERTIES}
    for line in dump.splitlines():
        cp, flags = line.split()
        for f in flags:
            sets[letters[f]].add(int(cp, 16))
    return version, {k: frozenset(v) for k, v in sets.items()}


def marks_from_perl(perl: str = "perl") -> str:
    """The text of MARKS_FILE, from perl's tables (its Unicode must be Python's): Alphabetic less
    what unicodedata already tells (letters, Nl, Lowercase, Uppercase)."""
    version, sets = perl_classes(perl)
    if version != UNICODE_VERSION:
        raise RuntimeError(f"perl's Unicode is {version}, Python's {UNICODE_VERSION}")
    derived = {
        cp
        for cp in range(0x110000)
        if unicodedata.category(chr(cp)) in LETTERS or chr(cp).islower() or chr(cp).isupper()
    }
    marks = sets["IsAlpha"] - derived
    lines = [
        f"# Alphabetic marks of Unicode {version} (Other_Alphabetic, Mn and Mc), from perl's tables",
        "# written by aiayn.evaluation.moses.marks_from_perl; checked by tests/test_protocol.py",
    ]
    lines += [f"{a:04X}" if a == b else f"{a:04X}..{b:04X}" for a, b in ranges(marks)]
    return "\n".join(lines) + "\n"


@functools.cache
def load_prefixes(lang: str) -> dict[str, int]:
    """tokenizer.perl's load_prefixes: {prefix: 1 (always nonbreaking) or 2 (only before a digit)};
    a language without a file falls back to English, as perl does."""
    folder = resources.files("aiayn.evaluation").joinpath(PREFIX_DIR)
    path = folder.joinpath(f"nonbreaking_prefix.{lang}")
    if not path.is_file():
        path = folder.joinpath("nonbreaking_prefix.en")
    out: dict[str, int] = {}
    numeric = re.compile(rf"(.*)[{unicode_class('s')}]+(#NUMERIC_ONLY#)")
    for item in path.read_text(encoding="utf-8").split("\n"):
        if item and item != "0" and not item.startswith("#"):  # perl: ($item) is false for "" and "0"
            m = numeric.search(item)
            if m:
                out[m[1]] = 2
            else:
                out[item] = 1
    return out


class Tokenizer:
    """tokenizer.perl -l `lang` (escaping on, no other option)."""

    def __init__(self, lang: str):
        self.lang = lang
        self.prefixes = load_prefixes(lang)
        alnum, n, alpha, lower = (unicode_class(k) for k in ("IsAlnum", "IsN", "IsAlpha", "IsLower"))
        s = unicode_class("s")
        self.space = s
        self.spaces = re.compile(f"[{s}]+")
        self.one_space = re.compile(f"[{s}]")
        self.only_space = re.compile(f"[{s}]*")
        self.junk = re.compile(r"[\x00-\x1f]")
        self.special = re.compile(rf"([^{alnum}{s}.'`,\-])")
        self.comma_1 = re.compile(rf"([^{n}])[,]")
        self.comma_2 = re.compile(rf"[,]([^{n}])")
        self.comma_3 = re.compile(rf"([{n}])[,]$")
        if lang == "en":
            self.apostrophe = [
                (re.compile(rf"([^{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
                (re.compile(rf"([^{alpha}{n}])[']([{alpha}])"), r"\1 ' \2"),
                (re.compile(rf"([{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
                (re.compile(rf"([{alpha}])[']([{alpha}])"), r"\1 '\2"),
                (re.compile(rf"([{n}])[']([s])"), r"\1 '\2"),
            ]
        elif lang in ("fr", "it", "ga"):
            self.apostrophe = [
                (re.compile(rf"([^{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
                (re.compile(rf"([^{alpha}])[']([{alpha}])"), r"\1 ' \2"),
                (re.compile(rf"([{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
                (re.compile(rf"([{alpha}])[']([{alpha}])"), r"\1' \2"),
            ]
        else:
            self.apostrophe = [(re.compile("'"), " ' ")]
        self.final_period = re.compile(rf"^([^{s}]+)\.$")
        self.any_alpha = re.compile(f"[{alpha}]")
        self.starts_lower = re.compile(f"^[{lower}]")

    def tokenize(self, line: str) -> str:
        """One line (without its line end) as tokenizer.perl prints it (without the line end)."""
        if self.only_space.fullmatch(line):  # perl: print $_ if /^\s*$/
            return line
        text = f" {line} "
        text = self.spaces.sub(" ", text)
        text = self.junk.sub("", text)
        text = re.sub(" +", " ", text)
        text = text.removeprefix(" ").removesuffix(" ")
        text = self.special.sub(r" \1 ", text)
        # multi-dots stay together
        text = re.sub(r"\.([.]+)", r" DOTMULTI\1", text)
        while "DOTMULTI." in text:
            text = re.sub(r"DOTMULTI\.([^.])", r"DOTDOTMULTI \1", text)
            text = text.replace("DOTMULTI.", "DOTDOTMULTI")
        text = self.comma_1.sub(r"\1 , ", text)
        text = self.comma_2.sub(r" , \1", text)
        text = self.comma_3.sub(r"\1 ,", text)
        for pattern, repl in self.apostrophe:
            text = pattern.sub(repl, text)
        text = self.words(text)
        text = re.sub(" +", " ", text)
        text = text.removeprefix(" ").removesuffix(" ")
        text = re.sub(r"\.' ?$", " . ' ", text, count=1)
        while "DOTDOTMULTI" in text:
            text = text.replace("DOTDOTMULTI", "DOTMULTI.")
        text = text.replace("DOTMULTI", ".")
        for a, b in (("&", "&amp;"), ("|", "&#124;"), ("<", "&lt;"), (">", "&gt;")):
            text = text.replace(a, b)
        for a, b in (("'", "&apos;"), ('"', "&quot;"), ("[", "&#91;"), ("]", "&#93;")):
            text = text.replace(a, b)
        return text

    def words(self, text: str) -> str:
        """The word loop: a word ending in "." is split from it unless a nonbreaking rule holds."""
        words = self.one_space.split(text)
        while words and words[-1] == "":  # perl's split drops trailing empty fields
            words.pop()
        out = []
        for i, word in enumerate(words):
            m = self.final_period.match(word)
            if m:
                pre = m[1]
                has_next = i < len(words) - 1
                if (
                    ("." in pre and self.any_alpha.search(pre))
                    or self.prefixes.get(pre) == 1
                    or (has_next and self.starts_lower.match(words[i + 1]))
                ):
                    pass
                elif self.prefixes.get(pre) == 2 and has_next and re.match(r"[0-9]+", words[i + 1]):
                    pass
                else:
                    word = pre + " ."
            out.append(word + " ")
        return "".join(out)


@functools.cache
def tokenizer(lang: str) -> Tokenizer:
    return Tokenizer(lang)


def tokenize(lines: list[str], lang: str) -> list[str]:
    """tokenizer.perl -l `lang` on each line."""
    tok = tokenizer(lang)
    return [tok.tokenize(line) for line in lines]
