#!/usr/bin/env python3
"""Load balance of causal attention's blocks over persistent CTAs (a model).

Each block of 128 queries walks ceil((q + 1) 128 / BN) K/V tiles (q its
query block, seq_q = seq_kv), plus one tile's worth of fixed cost. Prints,
for each shape, the longest CTA's share over the mean under:
  fastest   CTA c takes blocks p G + c, query blocks the grid's fastest axis
  slowest   the same with query blocks the slowest axis (longest first)
  snake     slowest, every other turn dealt in reverse
  hardware  one block a CTA: the next block goes to the first free SM
bench/NOTES.md, session 16.
    causal_balance.py [SMS] [BN]
"""
import heapq
import math
import sys


def lengths(s, bn):
    gq = s // 128
    return [math.ceil((gq - bx) * 128 / bn) + 1 for bx in range(gq)]  # longest first


def dealt(s, b, h, g, bn, order):
    ln = lengths(s, bn)
    gq, hb = len(ln), b * h
    loads = [0] * g
    for t in range(gq * hb):
        turn, c = divmod(t, g)
        if order == "snake" and turn % 2:
            c = g - 1 - c
        loads[c] += ln[t % gq] if order == "fastest" else ln[t // hb]
    return max(loads) * g / sum(loads)


def hardware(s, b, h, g, bn):
    ln = lengths(s, bn)
    free = [(0, c) for c in range(g)]
    total = 0
    for t in range(len(ln) * b * h):
        f, c = heapq.heappop(free)
        heapq.heappush(free, (f + ln[t % len(ln)], c))
        total += ln[t % len(ln)]
    return max(f for f, _ in free) * g / total


def main():
    g = int(sys.argv[1]) if len(sys.argv) > 1 else 132
    bn = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    print("%6s %3s %3s %8s %8s %8s %9s" % ("S", "B", "H", "fastest", "slowest", "snake", "hardware"))
    for d, h in ((128, 16), (64, 32)):
        for s in (2048, 4096, 8192, 16384):
            b = 16384 // s
            print("%6d %3d %3d %8.3f %8.3f %8.3f %9.3f" % (s, b, h, dealt(s, b, h, g, bn, "fastest"),
                                                       dealt(s, b, h, g, bn, "slowest"),
                                                       dealt(s, b, h, g, bn, "snake"), hardware(s, b, h, g, bn)))


if __name__ == "__main__":
    main()
