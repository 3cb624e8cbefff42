"""The ``encyclopedic`` suite: general-knowledge questions, and questions about pasted passages."""

from __future__ import annotations

from specgauge.suites.builtin_source.helpers import ask
from specgauge.suites.model import SuiteRequest

NAME = "encyclopedic"
MAX_TOKENS = 384
DESCRIPTION = ("General-knowledge questions written for specgauge across physics, chemistry, biology, history, "
               "economics, geography, astronomy and technology, plus summarise/explain tasks over pasted passages "
               "of one to three kilobytes. Intended max_tokens: 384 (512 for passage tasks).")

QUESTIONS = [
    "Why is the sky blue?",
    "What is the difference between weather and climate?",
    "Explain how a refrigerator moves heat from inside to outside.",
    "What did the Treaty of Westphalia (1648) change in European politics?",
    "How does a vaccine train the immune system?",
    "What is inflation, and how do central banks try to control it?",
    "Why did the Roman Republic become an empire? Name the main turning points.",
    "How do plate tectonics explain earthquakes and mountain ranges?",
    "What is the photoelectric effect and why was it important for quantum theory?",
    "Explain comparative advantage with a two-country example.",
    "What caused the 2008 financial crisis?",
    "How does CRISPR-Cas9 edit a gene?",
    "What is the difference between mitosis and meiosis?",
    "Why does the Moon always show the same face to Earth?",
    "What was the Silk Road and what travelled along it besides silk?",
    "How do antibiotics work, and why does resistance develop?",
    "Explain entropy in plain language.",
    "What were the main causes of the First World War?",
    "How does GPS determine a position, and why does it need relativity corrections?",
    "What is a black hole's event horizon?",
    "Why do countries run trade deficits, and are they always bad?",
    "How did the printing press change Europe in the 15th and 16th centuries?",
    "What is the role of mitochondria in a cell?",
    "How are rainbows formed, and why is there sometimes a second one?",
    "What is the difference between nuclear fission and fusion?",
    "Explain the water cycle, including the role of transpiration.",
    "Who was Ibn Battuta and why are his travels significant?",
    "What is quantitative easing?",
    "How do noise-cancelling headphones work?",
    "Why are there tides, and why are some tides higher than others?",
    "What was the Meiji Restoration?",
    "What is the greenhouse effect, and which gases contribute most?",
    "How does the human heart pump blood through two circuits?",
    "What is the Higgs boson and why was finding it important?",
    "Why did the Bronze Age civilizations of the eastern Mediterranean collapse around 1200 BCE? Summarize the "
    "main hypotheses.",
]

SEMICONDUCTORS = """\
Semiconductors sit between conductors and insulators. In a crystal of silicon each atom shares its four outer \
electrons with four neighbours, and at absolute zero every electron is locked into these bonds, so the crystal \
does not conduct. At room temperature a small fraction of electrons gain enough thermal energy to jump the band \
gap, about 1.1 electronvolts for silicon, into the conduction band, leaving behind holes that behave like \
positive charges. Both carriers move under an electric field, which is why pure silicon conducts a little and \
conducts better as it warms, the opposite of a metal.

Engineers rarely use pure silicon. Doping replaces a few silicon atoms in a million with atoms that have one more \
or one fewer outer electron. Phosphorus brings a fifth electron that is loosely bound and easily freed, producing \
n-type material with electrons as majority carriers. Boron brings only three, leaving a hole, producing p-type \
material. Where p-type and n-type regions meet, electrons diffuse into the p side and holes into the n side, \
leaving behind a thin depletion region of fixed charged ions whose electric field stops further diffusion. This \
p-n junction conducts easily in one direction and hardly at all in the other: a diode.

A transistor adds control. In the metal-oxide-semiconductor field-effect transistor that fills modern chips, a \
voltage on a gate electrode, insulated from the silicon by a layer of oxide a few nanometres thick, attracts \
carriers into a thin channel between a source and a drain. Below a threshold voltage the channel is absent and \
the switch is off; above it, current flows. Billions of these switches, wired into logic gates, make a \
processor. Shrinking them made chips faster and cheaper for decades, but as channels approached a few tens of \
atoms in length, leakage current and heat became limits, which is why designs moved to fins and then to gates \
that wrap around the channel on all sides.
"""

HANSEATIC = """\
The Hanseatic League was a network of merchant guilds and market towns that dominated trade across the North Sea \
and the Baltic from the thirteenth to the fifteenth century. It began not as a state but as associations of \
German merchants abroad, who banded together for protection and for privileges from foreign rulers, such as the \
right to trade without certain tolls. Towns such as Lübeck, Hamburg and Bremen became its core, and it kept \
trading posts, called Kontore, in London, Bruges, Bergen and Novgorod.

The League traded northern raw materials for western manufactured goods: grain from Prussia and Poland, timber, \
furs and wax from Russia, dried cod from Norway and herring from the Baltic, exchanged for Flemish and English \
cloth, wine and metal goods. Its ships, the broad cogs, carried bulk cargo cheaply, and its common law of the sea \
gave merchants predictable rules across many jurisdictions.

The League had no permanent army, treasury or government; its diet, the Hansetag, met irregularly and its \
decisions bound members only loosely. Yet it could act together: after Denmark tried to control the sound \
between the North Sea and the Baltic, the towns fought and won a war ending in the Peace of Stralsund in 1370, \
which confirmed their privileges. Its decline came gradually. Territorial states grew stronger and protected \
their own merchants, Dutch shippers undercut Hanseatic freight rates, the herring shoals shifted, and Atlantic \
trade routes moved the centre of European commerce west. The last diet met in 1669, with only a handful of towns \
attending.
"""

CENTRAL_BANK = """\
Memo to the board, quarterly outlook. Headline inflation fell from 6.1% to 3.4% over the past twelve months, \
mostly because energy prices dropped, but core inflation, which excludes food and energy, has come down only \
from 4.8% to 4.1%. Services inflation remains sticky at 5.0%, driven by wage growth of about 5% a year in a labour \
market where unemployment is 3.9%, near a fifty-year low. Inflation expectations measured by surveys of households \
have eased, while market-based five-year expectations stay close to 2.5%. The policy rate stands at 5.25% after \
four increases. Credit growth has slowed sharply, mortgage approvals are down 30% on the year, and business \
investment intentions have weakened. Staff project core inflation reaching the 2% target in about eighteen months \
if the rate is held, or twelve months if it is raised by a further 0.5 points, at the cost of raising \
unemployment by roughly 0.4 points more. Two members argue that the lag between rate changes and inflation means \
the full effect of past increases has not yet arrived.
"""

PASSAGE_TASKS = [
    (f"Summarize this passage in five bullet points for a high-school student.\n\n{SEMICONDUCTORS}", 384),
    (f"Using only this passage, explain why a warm piece of silicon conducts better than a cold one, and why a "
     f"metal behaves the other way.\n\n{SEMICONDUCTORS}", 384),
    (f"Write three quiz questions with answers based on this passage.\n\n{SEMICONDUCTORS}", 384),
    (f"Summarize this passage in one paragraph, then list the causes of decline it gives.\n\n{HANSEATIC}", 512),
    (f"Compare the Hanseatic League described here with a modern trade bloc such as the EU. Where does the "
     f"analogy hold and where does it break?\n\n{HANSEATIC}", 512),
    (f"Explain this memo to someone with no economics background, then say which way you would vote and why."
     f"\n\n{CENTRAL_BANK}", 512),
    (f"What are the arguments for holding versus raising rates in this memo? Put them in a two-column table."
     f"\n\n{CENTRAL_BANK}", 512),
]


def requests() -> list[SuiteRequest]:
    """Questions, then passage tasks."""
    return [ask(q, NAME, MAX_TOKENS) for q in QUESTIONS] + [ask(t, NAME, m) for t, m in PASSAGE_TASKS]
