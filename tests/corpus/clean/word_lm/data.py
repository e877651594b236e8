"""Dictionary and Corpus as in pytorch/examples word_language_model, fed synthetic text."""

import random

import torch

SUBJECTS = ["the cat", "a dog", "my friend", "the teacher", "our neighbour"]
VERBS = ["sees", "likes", "follows", "calls", "finds"]
OBJECTS = ["the ball", "a bird", "the house", "a letter", "the river"]


def synthetic_lines(n, seed):
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} ." for _ in range(n)
    ]


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    def __init__(self, n_train=300, n_valid=60, n_test=60):
        self.dictionary = Dictionary()
        self.train = self.tokenize(synthetic_lines(n_train, seed=0))
        self.valid = self.tokenize(synthetic_lines(n_valid, seed=1))
        self.test = self.tokenize(synthetic_lines(n_test, seed=2))

    def tokenize(self, lines):
        """Tokenizes a list of lines."""
        # Add words to the dictionary
        for line in lines:
            words = line.split() + ["<eos>"]
            for word in words:
                self.dictionary.add_word(word)

        # Tokenize file content
        idss = []
        for line in lines:
            words = line.split() + ["<eos>"]
            ids = []
            for word in words:
                ids.append(self.dictionary.word2idx[word])
            idss.append(torch.tensor(ids).type(torch.int64))
        ids = torch.cat(idss)
        return ids
