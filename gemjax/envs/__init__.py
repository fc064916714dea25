"""The games, registered under GEM's ids."""

from gemjax.envs.guess_the_number import GuessTheNumber
from gemjax.registry import register

GAMES = (GuessTheNumber,)

register("game:GuessTheNumber-v0-hard", GuessTheNumber, min_number=1, max_number=50, max_turns=7)
register("game:GuessTheNumber-v0-easy", GuessTheNumber, min_number=1, max_number=10, max_turns=4)
register(
    "game:GuessTheNumber-v0-random",
    GuessTheNumber,
    min_number=None,
    max_number=None,
    max_turns=None,
)
# Not a GEM id: the paper's discount-factor experiment (1..50 with 50 turns).
register(
    "game:GuessTheNumber-v0-hard-no-max-turn",
    GuessTheNumber,
    min_number=1,
    max_number=50,
    max_turns=50,
)

__all__ = ["GAMES", "GuessTheNumber"]
