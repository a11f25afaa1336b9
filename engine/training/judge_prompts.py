"""The judge's fixed prompts: written for the judge, never in any training corpus, so held out by
construction.

Fixed (not drawn from the growing corpus) so every model and every point of a training curve is measured on
the same requests. OPENINGS are the starts of plain modern paragraphs a writer might continue (the issue's
lighthouse paragraph first); CORRECT_SENTENCES are already-correct sentences that Fix grammar must return
unchanged; the rewrite-length check rewrites the same sentences at full strength with every length-neutral
preset.
"""

from __future__ import annotations

LIGHTHOUSE = (
    "The lighthouse keeper had not spoken to anyone in three weeks. Every morning he climbed the stairs, "
    "cleaned the great lamp and wrote the weather in his book."
)

OPENINGS: tuple[str, ...] = (
    LIGHTHOUSE,
    "Mia found a small box under her bed. It was old and blue, and it had a tiny lock on the front.",
    "The bus was late again. Tom stood at the stop with his bag and looked down the long, wet road.",
    "Our town market opens every Saturday morning. Farmers "
    "bring fresh bread, apples and honey from the hills.",
    "Dear Sam, thank you for your letter. I was very happy to hear about your new house by the river.",
    "The meeting started at nine. Anna put her coffee on the table and opened the report on her laptop.",
    "When the storm came, the lights in the house went out. Ben and his sister sat by the window and waited.",
    "To make a good cup of tea, start with fresh water. Boil it, then pour it over the tea leaves.",
    "The old dog slept by the fire all day. In the evening, he stood up, stretched and walked to the door.",
    "Yesterday our class went to the museum. We saw a big old ship, a dinosaur and many strange stones.",
    "Lily wanted to learn to swim. Every Sunday her father took her to the pool near the park.",
    "The garden was quiet in the early morning. A small bird sat on the fence and sang a happy song.",
    "The new library is bright and warm. There are soft chairs by the windows and a room for children.",
    "Max had never baked a cake before. He read the recipe "
    "twice and put the flour, eggs and sugar on the table.",
    "It was the first day at her new job. Sara was nervous, but the people in the office were kind.",
    "The train left the city at noon. Through the window, Leo watched the houses turn into green fields.",
    "Every year the village has a summer festival. People dance in the square and eat sweet cakes.",
    "Grandma keeps a small red notebook in her kitchen. In it she writes every recipe she has ever loved.",
    "The river was high after the rain. Two boys stood on the bridge and threw sticks into the water.",
    "Our team finished the project on Friday. On Monday we will show the plan to the whole company.",
    "The cat climbed up the tall tree and would not come down. Emma called her name again and again.",
    "Saving money is easier with a plan. First, write down what you spend each week.",
    "The snow fell all night. In the morning, the street was white and very quiet.",
    "Jack and his friend built a kite from paper and sticks. They ran to the top of the hill to fly it.",
)

CORRECT_SENTENCES: tuple[str, ...] = (
    "The lighthouse keeper had not spoken to anyone in three weeks.",
    "Mia opened the window and looked at the garden.",
    "The bus was late because of the snow.",
    "We will meet at the library after lunch.",
    "Tom likes to read books about ships and the sea.",
    "The market is busy every Saturday morning.",
    "She thanked her friend for the kind letter.",
    "The children played in the park until it was dark.",
    "Please send me the report before Friday.",
    "The old dog slept next to the warm fire.",
    "It rained all day, so we stayed at home.",
    "My sister is learning to play the piano.",
    "The team finished the project on time.",
    "He put the flour and the eggs on the table.",
    "The train to the city leaves at noon.",
    "Anna drank her coffee and opened her laptop.",
    "The river was high after the storm.",
    "Our teacher showed us a picture of the moon.",
    "The baker makes fresh bread every morning.",
    "They walked to the top of the hill to fly a kite.",
    "Grandma wrote the recipe in her red notebook.",
    "The new library has soft chairs by the windows.",
    "Ben could not find his keys this morning.",
    "The cat climbed the tree and would not come down.",
    "We planted three apple trees in the garden.",
    "The museum is closed on Mondays.",
    "Lily was happy when she learned to swim.",
    "The meeting will start at nine o'clock.",
    "A small bird sang on the fence.",
    "The snow made the street white and quiet.",
)
