"""pairwise's experiments: the class-conversion experiment (Rank over Class Table 4) and RankSVM's 20
Newsgroups workflow."""
