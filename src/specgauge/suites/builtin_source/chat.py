"""The ``chat`` suite: writing, editing, advice and everyday conversation, some with pasted drafts."""

from __future__ import annotations

from specgauge.suites.builtin_source.helpers import ask, conversation
from specgauge.suites.model import SuiteRequest

NAME = "chat"
MAX_TOKENS = 384
DESCRIPTION = ("Everyday assistant requests written for specgauge: writing and editing (emails, posts, stories, "
               "speeches), advice (work, study, health habits, money basics), brainstorming, and multi-turn "
               "follow-ups; some paste a long draft to edit. Intended max_tokens: 384 (512 for rewrites).")

REQUESTS = [
    "Write a haiku about a rainy Monday morning.",
    "Suggest five names for a neighbourhood book club.",
    "How do I politely decline a wedding invitation from a coworker?",
    "Write a two-paragraph cover letter opening for a junior data analyst role.",
    "Give me a 20-minute bodyweight workout I can do in a hotel room.",
    "What are some good questions to ask at the end of a job interview?",
    "Write a short bedtime story about a lighthouse keeper and a lost seagull.",
    "I keep procrastinating on my thesis. What are practical ways to get started each day?",
    "Write a toast for my sister's 40th birthday; she loves hiking and bad puns.",
    "How do I tell my manager I'm overloaded without sounding like I'm complaining?",
    "Plan a three-day itinerary for a first visit to Kyoto on a moderate budget.",
    "Write a LinkedIn post announcing that I've joined a new company as a product designer.",
    "What should I consider before adopting a dog while living in a small apartment?",
    "Rewrite this sentence to sound more confident: 'I think maybe we could possibly try a new approach.'",
    "Give me ten conversation starters for a team-building lunch with people I don't know well.",
    "Write a limerick about a cat who learns to use a laptop.",
    "How can I build an emergency fund when my income varies from month to month?",
    "Write a polite but firm message to a landlord about a heating repair that has been delayed for two weeks.",
    "Help me prepare for a difficult conversation with a friend who keeps cancelling plans.",
    "Suggest a weekly meal plan for a vegetarian who wants high-protein dinners, with a shopping list.",
    "Write a product description for a handmade ceramic mug, warm and a little playful, under 80 words.",
    "What are good habits for sleeping better when working night shifts?",
    "Write a short speech for a retirement party of a teacher who worked at the school for 35 years.",
    "Brainstorm themes for a 10-year-old's birthday party that doesn't involve screens.",
    "I'm learning Spanish on my own. How should I structure 30 minutes a day?",
    "Write an out-of-office reply for two weeks of parental leave.",
    "Explain to a nervous first-time flyer what the noises on a plane during take-off are.",
    "Write a short story opening (about 200 words) set in a city where it never stops snowing.",
    "Give me feedback on this tagline for a bike repair shop: 'We fix it before you miss it.'",
    "How do I say no to extra projects at work while staying on good terms with my team?",
    "Write a thank-you note to a neighbour who watered my plants while I was away.",
    "What is a kind way to give a colleague feedback that their presentations run too long?",
    "Write a four-line poem for the inside of a graduation card.",
    "I have a free Saturday in a rainy city. Suggest a relaxing plan from morning to evening.",
    "Draft a short message to a group chat proposing a monthly board-game night.",
]

DRAFT_EMAIL = """\
Hi all,

So I wanted to reach out regarding the thing we talked about last week in the meeting, which was about the \
timeline for the launch and also some of the budget items, which I think we didn't really finish discussing. \
Basically, what happened is that the vendor came back to us and said that they can't deliver the units by the \
end of the month like they said originally, and now they are saying it will be more like the middle of next \
month, possibly later, they weren't totally sure. This obviously has some knock-on effects for the launch date \
and also the marketing campaign that Priya's team has been planning, since the ads were booked for the first \
week. I talked to finance and they said that if we move the ads we might lose part of the deposit, maybe around \
30%, but they need to check the contract. Also I'm not sure if we should look at a second vendor, which would \
cost more per unit but might be faster, although I don't have numbers yet. Anyway, I think we need to decide \
something soon, probably this week, so maybe we can find a time to meet? Let me know what you think and also \
if I missed anything.

Thanks,
Tom
"""

ESSAY_DRAFT = """\
Public libraries are one of the few places left where you can stay as long as you like without buying \
anything. That sounds like a small thing but it isnt. In my town the library is where teenagers do homework \
after school because home is crowded, where older people come to read the newspaper and talk, and where people \
looking for work use the computers to apply for jobs. When the council proposed cutting the opening hours last \
year, a lot of people said that everything is online now and nobody needs libraries, but this misses the point \
that a library is not just books its a public space that belongs to everybody. Also the librarians help people \
with things like filling in forms and finding reliable information, which is more and more important when there \
is so much misinformation. In conclusion libraries should be funded because they are important for the \
community and also they are cheap compared to other services.
"""

EDITS = [
    (f"Rewrite this email so it is short and clear, with the decision we need in the first line and the options "
     f"as bullets.\n\n{DRAFT_EMAIL}", 512),
    (f"Turn this email into a three-sentence Slack message.\n\n{DRAFT_EMAIL}", 256),
    (f"Edit this opinion piece for grammar and flow, keep my voice, and suggest a stronger title.\n\n{ESSAY_DRAFT}",
     512),
    (f"Give me three concrete suggestions to make this argument more persuasive, with an example rewrite of one "
     f"paragraph.\n\n{ESSAY_DRAFT}", 512),
]

FOLLOW_UPS = [
    [("user", "I want to start running. I'm 45 and haven't exercised in years."),
     ("assistant", "That's a great goal. A walk-run plan is the safest start: three sessions a week, alternating "
                   "one minute of easy running with two minutes of walking for 20 minutes, and adding a little "
                   "running each week. Check with your doctor first if you have heart or joint concerns."),
     ("user", "My knees hurt a bit after the second session. Should I stop?")],
    [("user", "Can you help me write a birthday message for my grandmother?"),
     ("assistant", "Of course! Tell me a bit about her: her age, what she enjoys, and something you love about her."),
     ("user", "She's turning 90, loves gardening and crosswords, and she taught me to bake bread.")],
    [("user", "Give me a name for my coffee cart."),
     ("assistant", "How about 'Daily Grind on Wheels', 'Bean There', 'The Roving Roast' or 'Cart & Crema'?"),
     ("user", "I like 'The Roving Roast'. Now write a short sign that explains we use beans from local roasters.")],
]


def requests() -> list[SuiteRequest]:
    """Single requests, pasted-draft edits, then multi-turn follow-ups."""
    built = [ask(text, NAME, MAX_TOKENS) for text in REQUESTS]
    built += [ask(text, NAME, max_tokens) for text, max_tokens in EDITS]
    built += [conversation(turns, NAME, MAX_TOKENS, notes="multi-turn follow-up") for turns in FOLLOW_UPS]
    return built
