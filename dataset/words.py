"""Word lists pack names are made of; each word also shapes how a pack looks.

An adjective gives the pack its mood (which faces it prefers), a noun its
species: body shapes, what grows on the head, colours and markings.
"""

# adjective -> mood (see svg.MOODS)
ADJECTIVES = (
    ('happy', 'happy'), ('sunny', 'happy'), ('jolly', 'happy'),
    ('bubbly', 'happy'), ('cheerful', 'happy'), ('giggly', 'silly'),
    ('merry', 'happy'), ('cheeky', 'silly'), ('silly', 'silly'),
    ('goofy', 'silly'), ('dreamy', 'sleepy'), ('cozy', 'sleepy'),
    ('fluffy', 'shy'), ('tiny', 'shy'), ('chubby', 'happy'),
    ('sparkly', 'love'), ('lucky', 'happy'), ('sweet', 'love'),
    ('bouncy', 'silly'), ('cuddly', 'love'), ('dizzy', 'silly'),
    ('sleepy', 'sleepy'), ('lazy', 'sleepy'), ('grumpy', 'grumpy'),
    ('sassy', 'grumpy'), ('moody', 'grumpy'), ('spooky', 'spooky'),
    ('shy', 'shy'), ('brave', 'happy'), ('hungry', 'silly'),
    ('nerdy', 'shy'), ('fancy', 'love'), ('clumsy', 'silly'),
    ('wobbly', 'silly'), ('fuzzy', 'shy'), ('snappy', 'grumpy'),
    ('mellow', 'sleepy'), ('zesty', 'happy'), ('frosty', 'grumpy'),
    ('cosmic', 'spooky'),
)

# colour: None (any hue) or (hue_from, hue_to, saturation, lightness),
# hues in degrees, the rest 0..1
NOUNS = {
    'cats': (('round', 'blob', 'mochi'), ('cat',), None, ('whiskers',)),
    'kittens': (('round', 'egg'), ('cat',), None, ('whiskers',)),
    'bunnies': (('egg', 'round'), ('bunny',), None, ()),
    'bears': (('round', 'mochi'), ('bear',), (20, 40, .45, .6), ('nose',)),
    'foxes': (('round', 'egg'), ('cat',), (18, 30, .8, .62), ('patch',)),
    'frogs': (('mochi', 'blob'), ('frog',), (85, 135, .55, .6), ()),
    'ghosts': (('ghost',), ('none',), (200, 280, .35, .9), ()),
    'blobs': (('blob',), ('none', 'sprout'), None, ()),
    'slimes': (('blob', 'mochi'), ('none',), None, ('spots',)),
    'devils': (('round', 'blob'), ('horns',), (340, 375, .7, .62), ()),
    'imps': (('egg', 'blob'), ('horns',), (260, 300, .55, .65), ()),
    'aliens': (('egg', 'blob'), ('antennae',), (70, 170, .6, .62), ()),
    'monsters': (('blob', 'square', 'round'),
                 ('horns', 'antennae', 'bear', 'none'), None, ('spots',)),
    'owls': (('egg',), ('cat',), (20, 45, .35, .55), ('patch',)),
    'pandas': (('round', 'mochi'), ('bear',), (0, 0, 0, .96), ('eyepatch',)),
    'penguins': (('egg',), ('none',), (205, 230, .45, .35), ('patch',)),
    'piggies': (('round', 'mochi'), ('bear',), (340, 355, .75, .82),
                ('snout',)),
    'mice': (('egg', 'round'), ('mouse',), (220, 260, .1, .72),
             ('whiskers',)),
    'puppies': (('round', 'square'), ('floppy',), (25, 40, .55, .7), ()),
    'robots': (('square',), ('antennae',), (180, 220, .3, .7), ()),
    'potatoes': (('blob', 'egg'), ('none', 'sprout'), (28, 38, .45, .62),
                 ('spots',)),
    'axolotls': (('mochi', 'round'), ('gills',), (320, 345, .6, .8), ()),
    'dragons': (('egg', 'round'), ('horns',), (95, 160, .5, .55),
                ('spots',)),
    'hamsters': (('mochi', 'round'), ('bear',), (28, 40, .7, .72),
                 ('patch',)),
    'chicks': (('egg', 'round'), ('tuft',), (45, 55, .9, .66), ()),
    'dumplings': (('mochi',), ('none',), (35, 45, .5, .9), ('pleats',)),
    'mochis': (('mochi',), ('none', 'sprout'), None, ()),
    'stars': (('star',), ('none',), (40, 60, .9, .64), ()),
    'hearts': (('heart',), ('none',), (330, 365, .75, .68), ()),
    'critters': (('round', 'blob', 'egg'),
                 ('cat', 'bear', 'bunny', 'antennae'), None, ()),
    'beans': (('egg',), ('none', 'sprout'), (60, 140, .45, .6), ()),
    'koalas': (('round', 'mochi'), ('mouse',), (210, 230, .08, .68),
               ('bignose',)),
    'yetis': (('egg', 'blob'), ('horns',), (190, 210, .25, .92), ()),
    'raccoons': (('round', 'egg'), ('cat',), (220, 240, .08, .76),
                 ('eyepatch',)),
    'dinos': (('egg', 'blob'), ('spikes',), (90, 180, .5, .58), ('spots',)),
    'bats': (('round', 'egg'), ('cat',), (255, 285, .3, .4), ()),
}
NOUN_LIST = tuple(sorted(NOUNS))
