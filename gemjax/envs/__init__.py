"""The games, registered under GEM's ids."""

from gemjax.envs.crosswords import Crosswords
from gemjax.envs.fifteen_puzzle import FifteenPuzzle
from gemjax.envs.game_2048 import Game2048
from gemjax.envs.guess_the_number import GuessTheNumber
from gemjax.envs.hangman import Hangman
from gemjax.envs.mastermind import Mastermind
from gemjax.envs.minesweeper import Minesweeper
from gemjax.envs.sokoban import Sokoban
from gemjax.envs.sudoku import Sudoku
from gemjax.envs.tower_of_hanoi import TowerofHanoi
from gemjax.envs.word_search import WordSearch
from gemjax.envs.wordle import Wordle
from gemjax.registry import register

GAMES = (
    GuessTheNumber,
    Mastermind,
    Minesweeper,
    Wordle,
    Hangman,
    Sudoku,
    TowerofHanoi,
    FifteenPuzzle,
    Game2048,
    Sokoban,
    Crosswords,
    WordSearch,
)

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

register("game:Minesweeper-v0-easy", Minesweeper, rows=5, cols=5, num_mines=5, max_turns=25)
register("game:Minesweeper-v0-hard", Minesweeper, rows=8, cols=8, num_mines=12, max_turns=64)
register(
    "game:Minesweeper-v0-random",
    Minesweeper,
    rows=None,
    cols=None,
    num_mines=None,
    max_turns=None,
)

register("game:Wordle-v0-hard", Wordle, word_length=5, only_real_words=True, max_turns=25)
register("game:Wordle-v0-easy", Wordle, word_length=3, only_real_words=True, max_turns=15)
register("game:Wordle-v0-random", Wordle, word_length=None, only_real_words=True, max_turns=None)

register("game:Hangman-v0-random", Hangman, word_length=None, hardcore=False, max_turns=None)
register("game:Hangman-v0-easy", Hangman, word_length=3, hardcore=False, max_turns=10)
register("game:Hangman-v0-hard", Hangman, word_length=7, hardcore=False, max_turns=20)

register("game:Sudoku-v0-easy", Sudoku, clues=10, max_turns=15, scale=4)
register("game:Sudoku-v0-hard", Sudoku, clues=50, max_turns=50, scale=9)
register("game:Sudoku-v0-random", Sudoku, clues=None, max_turns=None, scale=None)

register("game:TowerofHanoi-v0-easy", TowerofHanoi, num_disks=3, max_turns=10)
register("game:TowerofHanoi-v0-hard", TowerofHanoi, num_disks=5, max_turns=35)
register("game:TowerofHanoi-v0-random", TowerofHanoi, num_disks=None, max_turns=None)

# GEM's -random id crashes in its constructor; this one draws GEM's intended
# configurations (docs/gem_differences.md).
register("game:FifteenPuzzle-v0-random", FifteenPuzzle, num_rows=None, max_turns=None)
register("game:FifteenPuzzle-v0-easy", FifteenPuzzle, num_rows=2, max_turns=10)
register("game:FifteenPuzzle-v0-hard", FifteenPuzzle, num_rows=4, max_turns=50)

register("game:Game2048-v0-easy", Game2048, target_tile=64, max_turns=50)
register("game:Game2048-v0-hard", Game2048, target_tile=512, max_turns=50)
register("game:Game2048-v0-extreme-hard", Game2048, target_tile=2048, max_turns=100)
register("game:Game2048-v0-random", Game2048, target_tile=None, max_turns=None)

register("game:Sokoban-v0-easy", Sokoban, dim_room=6, num_boxes=2, max_turns=20)
register("game:Sokoban-v0-hard", Sokoban, dim_room=8, num_boxes=4, max_turns=50)
register("game:Sokoban-v0-random", Sokoban, dim_room=None, num_boxes=None, max_turns=None)

# GEM's -random id crashes in its constructor; this one draws GEM's intended
# configurations (docs/gem_differences.md).
register("game:Crosswords-v0-easy", Crosswords, hardcore=False, max_turns=30, num_words=3)
register("game:Crosswords-v0-hard", Crosswords, hardcore=True, max_turns=40, num_words=3)
register("game:Crosswords-v0-random", Crosswords, hardcore=None, max_turns=None, num_words=None)

register("game:WordSearch-v0-easy", WordSearch, num_words=5, max_turns=20, hardcore=False)
register("game:WordSearch-v0-hard", WordSearch, num_words=5, max_turns=20, hardcore=True)
register("game:WordSearch-v0-random", WordSearch, num_words=None, max_turns=None, hardcore=None)

__all__ = [
    "GAMES",
    "Crosswords",
    "FifteenPuzzle",
    "Game2048",
    "GuessTheNumber",
    "Hangman",
    "Mastermind",
    "Minesweeper",
    "Sokoban",
    "Sudoku",
    "TowerofHanoi",
    "WordSearch",
    "Wordle",
]
