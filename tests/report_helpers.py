"""What the report's tests share: a store with hostile names planted in it, and a structural check of the page."""

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from casstore import CompactionRecord, ContentAddressedToolResultStore, OffloadRecord

# Script, image and attribute injections, as a model told to write them might pass them to a tool.
HOSTILE = [
    '"><img src=x onerror="window.__pwned=1">.txt',
    "<script>window.__pwned=2</script>",
    "' onmouseover='window.__pwned=3' x='",
    '</title><svg onload="window.__pwned=4"></svg>',
    "</textarea></style><iframe src=javascript:window.__pwned=5>",
    "&lt;b&gt;not bold&lt;/b&gt; & <!-- a comment --> ]]>",
]
HOSTILE_NAMESPACE = '<img src=x onerror="window.__pwned=6">'

# The elements and attributes casstore's page is made of; anything else in its DOM was injected.
PAGE_TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p", "code", "main", "section", "dl",
    "div", "dt", "dd", "figure", "svg", "text", "line", "circle", "rect", "path", "g", "table", "thead", "tbody",
    "tr", "th", "td", "footer",
}  # fmt: skip
PAGE_ATTRIBUTES = {
    "lang", "charset", "http-equiv", "content", "name", "id", "class", "xmlns", "data-chart", "role", "width",
    "height", "viewbox", "font-family", "font-size", "font-weight", "x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "r",
    "fill", "stroke", "stroke-width", "stroke-dasharray", "text-anchor", "transform", "d", "data-kind",
    "data-series", "data-value", "data-before", "data-after", "data-target",
}  # fmt: skip


@dataclass
class PageStructure(HTMLParser):
    """Every start tag and attribute name of a page, and its text, as an HTML parser reads them."""

    tags: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)
    text: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(convert_charrefs=True)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @classmethod
    def of(cls, page: str) -> "PageStructure":
        parsed = cls()
        parsed.feed(page)
        parsed.close()
        return parsed


def plant_hostile_store(root: Path) -> None:
    """A store whose keys, tool names, namespace and content previews are all injections, with compactions."""
    with ContentAddressedToolResultStore(root, namespace=HOSTILE_NAMESPACE) as store:
        references = []
        for number, name in enumerate(HOSTILE):
            content = f"{name}\n{HOSTILE[(number + 1) % len(HOSTILE)]}\n" * 3
            for _ in range(2):  # twice each: a repeated result, with its key and a preview in both rankings
                references.append(store.write(key=name, content=content))
        for number, name in enumerate(HOSTILE):
            store.record_compaction(
                compaction_id=f"compaction-{number}",
                compaction=CompactionRecord(10_000 + number, 4_000, 5_000, 16_000),
                offloads=[OffloadRecord(name, name, [references[2 * number]], 3_000, 2_500)],
            )
