"""Moses `tokenizer.perl -l LANG` as it was at mosesdecoder 59bad94f (2017-06-12, the last commit
before the paper): the tokenization of the paper's tokenized BLEU (tensor2tensor's get_ende_bleu.sh).

sacremoses' `MosesTokenizer` is the engine: its rules, in its order. Where the script of 2017
under perl 5.36 differs from it, the piece is ours (`Tokenizer` overrides it):
- the character classes are perl's, of **Unicode 14.0** (perl 5.36), read from the package's
  data file `CLASSES_FILE` on every Python: never from the running interpreter's `unicodedata`
  (Python 3.12 and 3.13 have Unicode 15), nor from sacremoses' tables (a later Unicode, with
  viramas and nuktas added to IsAlnum, which perl does not count). `\\p{IsAlpha}` is Alphabetic,
  `\\p{IsAlnum}` Alphabetic or Nd, `\\p{IsN}` the general category N, `\\p{IsLower}` Lowercase,
  and `\\s` White_Space, which leaves U+001C..U+001F to the control-character rule
  (`sehr\\x1cgutes` is `sehrgutes`); tests/test_protocol.py checks the file at every code point
  against perl's own answer (and against `unicodedata` on an interpreter of Unicode 14);
- the first lines of perl's `tokenize` (white space runs to one space, control characters
  deleted, spaces collapsed): sacremoses deletes control characters without collapsing the two
  spaces that can leave;
- a line of white space only (or empty) is printed as it is, untokenized;
- the word loop (`handles_nonbreaking_prefixes`) splits at every single white space, as
  `split(/\\s/)` does (two spaces make an empty word, which the next-word rule for a final period
  sees), and keeps a line-final "Nr." whole, as 2017 did (later Moses splits it);
- the multi-dot rules are perl's loops (sacremoses' single pass differs where the text holds
  the literal DOTMULTI);
- the nonbreaking prefixes are the lists of Moses 2017 read with perl's `load_prefixes` rules:
  sacremoses' own lists where they are 2017's (checked by digest, `SACREMOSES_2017`), the
  package's files where sacremoses ships later ones (en, sv, ta: `nonbreaking_prefixes/`), and
  English for a language Moses 2017 had no list for, as perl falls back;
- ga takes the apostrophe rules of fr and it.
A byte-order mark is not white space: tokenizer.perl makes it a token of its own, and so do we.
Not ported: the options the protocol does not use (-a, -x, -penn, -no-escape, protected patterns,
threads).
"""

from __future__ import annotations

import functools
import hashlib
import re
from importlib import resources

from sacremoses import MosesTokenizer
from sacremoses.corpus import NonbreakingPrefixes

from aiayn.errors import UserError

UNICODE = "14.0.0"  # perl 5.36's, the Unicode of the protocol fixtures
CLASSES_FILE = f"perl_classes-{UNICODE}.txt"
PREFIX_DIR = "nonbreaking_prefixes"

# what each perl class of tokenizer.perl stands for, for messages and tests
PROPERTIES = {
    "IsAlpha": "Alphabetic",
    "IsAlnum": "Alphabetic or General_Category=Nd",
    "IsN": "General_Category=N",
    "IsLower": "Lowercase",
    "s": "White_Space",
}

# the languages Moses 2017 had a nonbreaking prefix list for (scripts/share/nonbreaking_prefixes);
# tokenizer.perl uses English's for any other
LISTS_2017 = frozenset("ca cs de el en es fi fr ga hu is it lt lv nl pl pt ro ru sk sl sv ta yue zh".split())
# the package's files in PREFIX_DIR, read as perl reads them: Moses 2017's where sacremoses ships later
# lists (en, sv, ta), and Moses' own files where sacremoses' reader would differ from perl's (it strips the
# trailing spaces some of their lines have, which make those prefixes never match in perl)
OWN_2017 = frozenset({"en", "sv", "ta"})
OWN_FILES = OWN_2017 | {"cs", "es", "it", "nl", "sk"}
# sha256 of the prefixes sacremoses' public NonbreakingPrefixes().words(lang) gives (one per line, in
# order) for every other language of LISTS_2017; a sacremoses whose list differs is refused rather than
# silently changing the protocol (de and fr are Moses 2017's, the paper's languages)
SACREMOSES_2017 = {
    "ca": "d3556b30a51845075103ed14bf75b47d35cdc3437d1fc4d8060555fc4ad7468f",
    "de": "c6a3f1904e450f22f3920b2badd2a06cfbc20161d1b2f6d368fa28c3db95771e",
    "el": "fd4c02b40b5fea9ebc7e930b7c79166f7191a9caa8085c48d31fa3ac33d4d24c",
    "fi": "32b365de06b30784092917746afd835b56e2758c9bc2c3750cd4e860322850af",
    "fr": "fb73505e38adce25addc71bfa63117292285ff3392f021f5e0f45c04e86961e3",
    "ga": "6403d6975d079f13dc155d3136a303cad00e2e92d5429553d9581fddbb9f5d02",
    "hu": "ddd9ec9a05dd8eaf14aab52225b49d2ae3d2e697b8c61dc6c63fa821e4c0008e",
    "is": "1c4457f99dc2e54343948d2b23d35a10356175db7cfa55e89fdface64c7f1419",
    "lt": "c66985eb00d86cc5d7bdf25acfbcabe4ec33ade4f9449ca2deec7a869f914709",
    "lv": "f527d2317af9ea681ac5f981a2fd69fec92a98de3cb21f44244052433b06cbbc",
    "pl": "5ba4bff3aeff2b88b8164c6c5e952206730ef7819a09c0ae5ca9122987746f58",
    "pt": "7a20e596834530098ecfeaec64c6943d315b94432ba44de9e816cf759e919ee7",
    "ro": "3f488fe319a194b136c522f2823b0981e334b6bf660990d419357693fdf42efe",
    "ru": "2dc6902f3ce656a5d86ad7c489fde19c89358725a63f78c21c62b2de34b647ac",
    "sl": "6f969913a07bed0629c09ce5f68d642100b6824702e12e28de1ed1e5ac17b809",
    "yue": "41c266ec7c4245b2cb1692ca11529da08b4891ffd71165caf4de0248458e46bb",
    "zh": "41c266ec7c4245b2cb1692ca11529da08b4891ffd71165caf4de0248458e46bb",
}


# -- perl's character classes, Unicode 14 -------------------------------------------------------------
def ranges(points) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for cp in sorted(points):
        if out and cp == out[-1][1] + 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return [(a, b) for a, b in out]


def read_classes(text: str) -> dict[str, frozenset[int]]:
    sets: dict[str, set[int]] = {}
    current = None
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("["):
            current = sets.setdefault(line[1:].split("]")[0], set())
        elif line:
            a, _, b = line.partition("..")
            current.update(range(int(a, 16), int(b or a, 16) + 1))
    if set(sets) != set(PROPERTIES):
        raise RuntimeError(f"{CLASSES_FILE}: classes {sorted(sets)}, expected {sorted(PROPERTIES)}; reinstall aiayn")
    return {k: frozenset(v) for k, v in sets.items()}


@functools.cache
def _classes() -> dict[str, frozenset[int]]:
    return read_classes(resources.files("aiayn.evaluation").joinpath(CLASSES_FILE).read_text(encoding="ascii"))


def code_points(name: str) -> frozenset[int]:
    """The code points perl 5.36's class `name` (a key of PROPERTIES) holds: Unicode 14, on every Python."""
    return _classes()[name]


@functools.cache
def unicode_class(name: str) -> str:
    """`re` class body (no brackets) of perl's class `name`."""
    esc = lambda cp: f"\\U{cp:08x}"  # noqa: E731
    return "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges(code_points(name)))


# -- nonbreaking prefixes of 2017 ---------------------------------------------------------------------
def prefix_items(lang: str) -> list[str]:
    """The lines of Moses 2017's list for `lang` that tokenizer.perl's load_prefixes takes as
    prefixes (English's for a language 2017 had no list for, as perl falls back)."""
    lang = lang if lang in LISTS_2017 else "en"
    if lang in OWN_FILES:
        text = resources.files("aiayn.evaluation").joinpath(PREFIX_DIR, f"nonbreaking_prefix.{lang}").read_text("utf-8")
        # perl: chomp, then ($item) is false for "" and "0", and a line starting with # is a comment
        return [item for item in text.split("\n") if item and item != "0" and not item.startswith("#")]
    items = [w for w in NonbreakingPrefixes().words(lang) if w != "0"]
    digest = hashlib.sha256("\n".join(items).encode()).hexdigest()
    if digest != SACREMOSES_2017[lang]:
        import sacremoses

        raise UserError(
            f"sacremoses {sacremoses.__version__}: its nonbreaking prefixes for '{lang}' are not those of Moses "
            "2017 that the paper's tokenization uses; install the sacremoses that pyproject.toml names"
        )
    return items


@functools.cache
def load_prefixes(lang: str) -> dict[str, int]:
    """tokenizer.perl's load_prefixes: {prefix: 1 (always nonbreaking) or 2 (only before a digit)}."""
    numeric = re.compile(rf"(.*)[{unicode_class('s')}]+(#NUMERIC_ONLY#)")
    out: dict[str, int] = {}
    for item in prefix_items(lang):
        m = numeric.search(item)
        if m:
            out[m[1]] = 2
        else:
            out[item] = 1
    return out


# -- the tokenizer ------------------------------------------------------------------------------------
class Tokenizer(MosesTokenizer):
    """tokenizer.perl -l `lang` of 2017 (escaping on, no other option): sacremoses' MosesTokenizer
    with perl 2017's classes, prefixes and the rules where the two differ (module docstring)."""

    def __init__(self, lang: str):
        super().__init__(lang="en")  # its own prefixes and CJK additions are replaced below
        self.lang = "fr" if lang == "ga" else lang  # sacremoses' fr/it apostrophe rules, which 2017 gives ga too
        self.prefixes = load_prefixes(lang)
        self.NONBREAKING_PREFIXES = [p for p, kind in self.prefixes.items() if kind == 1]
        self.NUMERIC_ONLY_PREFIXES = [p for p, kind in self.prefixes.items() if kind == 2]
        alnum, n, alpha, lower, s = (unicode_class(k) for k in ("IsAlnum", "IsN", "IsAlpha", "IsLower", "s"))
        self.IsAlnum, self.IsN, self.IsAlpha, self.IsLower = alnum, n, alpha, lower
        self.only_space = re.compile(f"[{s}]*")
        self.one_space = re.compile(f"[{s}]")
        self.DEDUPLICATE_SPACE = re.compile(f"[{s}]+"), " "
        self.ASCII_JUNK = re.compile(r"[\x00-\x1f]"), ""
        self.PAD_NOT_ISALNUM = re.compile(rf"([^{alnum}{s}.'`,\-])"), r" \1 "
        self.COMMA_SEPARATE_1 = re.compile(rf"([^{n}])[,]"), r"\1 , "
        self.COMMA_SEPARATE_2 = re.compile(rf"[,]([^{n}])"), r" , \1"
        self.COMMA_SEPARATE_3 = re.compile(rf"([{n}])[,]$"), r"\1 , "
        self.ENGLISH_SPECIFIC_APOSTROPHE = [
            (re.compile(rf"([^{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
            (re.compile(rf"([^{alpha}{n}])[']([{alpha}])"), r"\1 ' \2"),
            (re.compile(rf"([{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
            (re.compile(rf"([{alpha}])[']([{alpha}])"), r"\1 '\2"),
            (re.compile(rf"([{n}])[']([s])"), r"\1 '\2"),
        ]
        self.FR_IT_SPECIFIC_APOSTROPHE = [
            (re.compile(rf"([^{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
            (re.compile(rf"([^{alpha}])[']([{alpha}])"), r"\1 ' \2"),
            (re.compile(rf"([{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
            (re.compile(rf"([{alpha}])[']([{alpha}])"), r"\1' \2"),
        ]
        self.final_period = re.compile(rf"^([^{s}]+)\.$")
        self.any_alpha = re.compile(f"[{alpha}]")
        self.starts_lower = re.compile(f"^[{lower}]")

    def tokenize(self, text: str, **_) -> str:  # type: ignore[override]
        """One line (without its line end) as tokenizer.perl prints it (without the line end)."""
        if self.only_space.fullmatch(text):  # perl: print $_ if /^\s*$/
            return text
        # perl: $text = " $text "; s/\s+/ /g; s/[\000-\037]//g; s/ +/ /g; s/^ //g; s/ $//g
        for regexp, substitution in (self.DEDUPLICATE_SPACE, self.ASCII_JUNK):
            text = regexp.sub(substitution, f" {text} ")
        text = re.sub(" +", " ", text).strip(" ")
        return super().tokenize(text, return_str=True, escape=True)

    def replace_multidots(self, text: str) -> str:
        text = re.sub(r"\.([.]+)", r" DOTMULTI\1", text)
        while "DOTMULTI." in text:
            text = re.sub(r"DOTMULTI\.([^.])", r"DOTDOTMULTI \1", text)
            text = text.replace("DOTMULTI.", "DOTDOTMULTI")
        return text

    def restore_multidots(self, text: str) -> str:
        while "DOTDOTMULTI" in text:
            text = text.replace("DOTDOTMULTI", "DOTMULTI.")
        return text.replace("DOTMULTI", ".")

    def handles_nonbreaking_prefixes(self, text: str) -> str:
        """perl's word loop: a word ending in "." is split from it unless a nonbreaking rule holds."""
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
