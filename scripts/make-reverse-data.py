#!/usr/bin/env python3
"""Writes the reverse task's data: one sequence per line, 16 integers from 0 to 99
separated by single spaces, whose second half mirrors the first:
    12 7 99 3 45 0 8 61 61 8 0 45 3 99 7 12
The random numbers come from splitmix64 written out here (not Python's `random`),
so a given --seed writes the same file on every Python version.

usage: make-reverse-data.py [--seed N] [--count N] > FILE
"""
import argparse
import sys

MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=20000)
    a = ap.parse_args()
    state = a.seed & MASK
    out = []
    for _ in range(a.count):
        half = []
        for _ in range(8):
            state, r = splitmix64(state)
            half.append(r % 100)
        out.append(" ".join(str(x) for x in half + half[::-1]))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
