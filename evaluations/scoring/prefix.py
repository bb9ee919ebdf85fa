"""A token trie over the sequences of one call, packed into rows for tree attention.

Conditions of an item share their opening regions, and every sentence shares BOS, so
the sequences of a suite form a trie with far fewer nodes than they have tokens. Each
node is run through the model once: nodes are packed into rows where every node may
attend only to itself and its ancestors (a 4D mask) at position = its depth. A
continuation thus reads its prefix's keys and values, computed once, exactly as it
would from a KV cache, but siblings of all depths share a single forward pass.

Pure Python; no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Row:
    nodes: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)  # row-local index of the parent, -1 at a root
    depths: list[int] = field(default_factory=list)  # position ids

    def __len__(self) -> int:
        return len(self.nodes)


class PrefixTrie:
    """Nodes are token positions; children are keyed by token id."""

    def __init__(self) -> None:
        self.token: list[int] = []
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.children: list[dict[int, int]] = []
        self.roots: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.token)

    def insert(self, ids: Sequence[int]) -> list[int]:
        """Add a path; return the node of every position."""
        nodes: list[int] = []
        level = self.roots
        parent = -1
        for depth, token in enumerate(ids):
            node = level.get(token)
            if node is None:
                node = len(self.token)
                self.token.append(token)
                self.parent.append(parent)
                self.depth.append(depth)
                self.children.append({})
                level[token] = node
            nodes.append(node)
            level = self.children[node]
            parent = node
        return nodes

    def subtree_sizes(self) -> list[int]:
        # Nodes are created after their parents, so one reverse sweep accumulates sizes.
        size = [1] * len(self.token)
        for node in range(len(self.token) - 1, -1, -1):
            parent = self.parent[node]
            if parent >= 0:
                size[parent] += size[node]
        return size

    def _preorder(self, root: int) -> list[int]:
        order: list[int] = []
        stack = [root]
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(reversed(self.children[node].values()))
        return order

    def units(self, capacity: int) -> list[tuple[tuple[int, ...], list[int]]]:
        """Split the forest into (ancestor path, subtree roots) pieces of <= capacity nodes.

        A subtree too large for one piece is opened up: its root joins the path and its
        children are grouped into pieces that share that path. The path nodes are then
        run again in each piece, which is the only duplicated work.
        """
        size = self.subtree_sizes()
        pieces: list[tuple[tuple[int, ...], list[int]]] = []
        pending: list[tuple[tuple[int, ...], list[int]]] = [((), list(self.roots.values()))]
        while pending:
            path, children = pending.pop()
            room = capacity - len(path)
            if room < 1:
                raise ValueError("row capacity is smaller than the trie's depth")
            group: list[int] = []
            used = 0
            for child in sorted(children, key=lambda node: size[node], reverse=True):
                if size[child] > room:
                    pending.append(((*path, child), list(self.children[child].values())))
                    continue
                if used + size[child] > room:
                    pieces.append((path, group))
                    group, used = [], 0
                group.append(child)
                used += size[child]
            if group:
                pieces.append((path, group))
        return pieces

    def pack(self, capacity: int) -> list[Row]:
        """Rows of at most `capacity` nodes covering every node (first-fit decreasing)."""
        size = self.subtree_sizes()
        pieces = self.units(capacity)
        pieces.sort(key=lambda piece: len(piece[0]) + sum(size[r] for r in piece[1]), reverse=True)
        rows: list[Row] = []
        members: list[dict[int, int]] = []  # node -> row-local index, per row
        for path, roots in pieces:
            body = len(path) + sum(size[r] for r in roots)
            target = None
            for index, row in enumerate(rows):
                # Path nodes already in the row are shared, not repeated.
                extra = body - sum(1 for node in path if node in members[index])
                if len(row) + extra <= capacity:
                    target = index
                    break
            if target is None:
                rows.append(Row())
                members.append({})
                target = len(rows) - 1
            row, local = rows[target], members[target]
            for node in [*path, *(n for r in roots for n in self._preorder(r))]:
                if node in local:
                    continue
                parent = self.parent[node]
                local[node] = len(row.nodes)
                row.nodes.append(node)
                row.parents.append(local[parent] if parent >= 0 else -1)
                row.depths.append(self.depth[node])
        rows.sort(key=len, reverse=True)
        return rows
