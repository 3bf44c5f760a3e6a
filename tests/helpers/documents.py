"""Documents several test modules share."""

from __future__ import annotations

from synopsis.document import Document, Section

_TOPICS = ("Installation", "Configuration", "Usage", "Deployment", "Troubleshooting", "Contributing")

#: A project README as users paste it: long Markdown with several headings, far from the paper abstracts the
#: bundled model was trained on, so the default summarizes it with salient sentences and a note.
LONG_README = "# Harbor tool\n\n" + "\n\n".join(
    f"## {topic}\n\n"
    + " ".join(
        f"The {topic.lower()} guide explains how operators keep the harbor service running on step {step}."
        f" Each operator checks the {topic.lower()} settings before the nightly release of step {step}."
        for step in range(1, 5)
    )
    for topic in _TOPICS
)


def long_document() -> Document:
    """Sections: a long one (five paragraphs) with a child, and an empty one; id ``long``."""
    paragraphs = [[f"Sentence {p} {i} has a few words in it." for i in range(7)] for p in range(5)]
    root = Section()
    section = root.add(Section(heading="Long", paragraphs=paragraphs))
    section.add(Section(heading="Child", paragraphs=[["A child sentence with words."]]))
    root.add(Section(heading="Nothing"))
    return Document(root, id="long")
