"""The games, registered under GEM's ids."""

from gemjax.envs.guess_the_number import GuessTheNumber
from gemjax.envs.mastermind import Mastermind
from gemjax.registry import register

GAMES = (GuessTheNumber, Mastermind)

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

register(
    "game:Mastermind-v0-hard",
    Mastermind,
    code_length=4,
    num_numbers=8,
    max_turns=30,
    duplicate_numbers=False,
)
register(
    "game:Mastermind-v0-random",
    Mastermind,
    code_length=None,
    num_numbers=None,
    max_turns=None,
    duplicate_numbers=False,
)
register(
    "game:Mastermind-v0-easy",
    Mastermind,
    code_length=2,
    num_numbers=6,
    max_turns=10,
    duplicate_numbers=False,
)

__all__ = ["GAMES", "GuessTheNumber", "Mastermind"]
