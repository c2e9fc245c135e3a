"""Statistical models behind the generators: NAPSU-MQ's canonical queries and max-ent network."""

from synthinfer.models.canonical import CanonicalQueries
from synthinfer.models.junction_tree import JunctionTree
from synthinfer.models.markov_network import MarkovNetwork

__all__ = ["CanonicalQueries", "JunctionTree", "MarkovNetwork"]
