"""The papers' encoders beside P-SP's average: sentence heads over unit vectors, and units formed from characters.

This file is Hub remote code: it imports only torch.

A head turns the unit vectors of each sentence (all sentences back to back, `offsets` marking where each starts)
into one vector: a projection after the mean (ICLR 2016), LSTMs with and without output gate (ICLR 2016,
ParaNMT-50M), a bidirectional LSTM (ParaNMT-50M) and GRAN (back-translation paper, EMNLP 2017). Recurrent heads
run on packed sequences on a GPU and on one padded batch on a CPU (see `run_lstm`); the mean skips the padding.

Word and trigram units come from a character tokenizer: the model forms them from the character ids (whitespace
words, and character trigrams of each word with a boundary mark at both ends) and finds their table rows by
binary search in a sorted buffer of unit codes. A trigram's code is its three character ids as a base-C number;
a word's code is two polynomial hashes of its characters (modulo two primes below 2**31) packed into one int64,
so that any word, of any length, has a code. Rows 0 and 1 are the unknown and padding units; code i of the
sorted buffer is row i + 2.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

AVERAGING = ("psp", "mean", "max")
RECURRENT = ("lstm", "lstm_no_output_gate", "blstm", "gran")
FIRST_UNIT_ROW = 2
WORD_HASH_PRIMES = (2_147_483_629, 2_147_483_587)  # below 2**31: products with a char id stay inside int64
WORD_HASH_BASES = (1_000_003, 999_983)


def bag_positions(offsets: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For `total` flat entries in bags starting at `offsets`: each entry's bag, its position in it, bag lengths."""
    lengths = torch.diff(offsets, append=offsets.new_tensor([total]))
    bag = torch.repeat_interleave(torch.arange(offsets.numel(), device=offsets.device), lengths)
    position = torch.arange(total, device=offsets.device) - offsets[bag]
    return bag, position, lengths


def to_padded(vectors: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat `(total, dim)` vectors in bags -> `(bags, longest, dim)` zero-padded, and the bag lengths."""
    bag, position, lengths = bag_positions(offsets, vectors.shape[0])
    longest = int(lengths.max()) if lengths.numel() else 0
    padded = vectors.new_zeros((offsets.numel(), max(longest, 1), vectors.shape[1]))
    padded[bag, position] = vectors
    return padded, lengths


def masked_mean(sequence: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Mean over the first `lengths[i]` steps of `sequence[i]` (zeros for an empty bag)."""
    steps = torch.arange(sequence.shape[1], device=sequence.device)
    mask = (steps[None, :] < lengths[:, None]).to(sequence.dtype).unsqueeze(-1)
    return (sequence * mask).sum(1) / lengths.clamp_min(1).to(sequence.dtype).unsqueeze(1)


class NoOutputGateLSTM(nn.Module):
    """An LSTM layer whose output gate is fixed at 1 (`h_t = tanh(c_t)`), as the ICLR 2016 paper's variant."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        # Input, forget and cell-candidate gates only.
        self.input_map = nn.Linear(input_size, 3 * hidden_size)
        self.hidden_map = nn.Linear(hidden_size, 3 * hidden_size, bias=False)

    def forward(self, padded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Hidden states `(bags, steps, hidden)` of zero-padded input; states past a bag's length are zero."""
        bags, steps, _ = padded.shape
        projected = self.input_map(padded)
        h = padded.new_zeros((bags, self.hidden_size))
        c = padded.new_zeros((bags, self.hidden_size))
        outputs = []
        for step in range(steps):
            gates = projected[:, step] + self.hidden_map(h)
            i, f, g = gates.chunk(3, dim=1)
            c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h_next = torch.tanh(c_next)
            alive = (lengths > step).to(padded.dtype).unsqueeze(1)
            c = alive * c_next + (1 - alive) * c
            h = alive * h_next + (1 - alive) * h
            outputs.append(h_next * alive)
        return torch.stack(outputs, dim=1)


class SentenceHead(nn.Module):
    """The part of an encoder after the table: unit vectors of each sentence -> one sentence vector.

    `encoder_type` is one of `AVERAGING` (handled by the model's pooling, not here), `"projection"` or
    `RECURRENT`. The recurrent heads keep the width: hidden size = unit dimension.
    """

    def __init__(self, encoder_type: str, dim: int):
        super().__init__()
        self.encoder_type = encoder_type
        self.pack: bool | None = None  # packed sequences: None = on a GPU only (see run_lstm)
        if encoder_type == "projection":
            # Starts as the identity, so an untrained projection model is the plain average it builds on.
            self.projection = nn.Linear(dim, dim)
            with torch.no_grad():
                self.projection.weight.copy_(torch.eye(dim))
                self.projection.bias.zero_()
        elif encoder_type in ("lstm", "gran", "blstm"):
            self.lstm = nn.LSTM(dim, dim, batch_first=True)
            if encoder_type == "blstm":  # the backward direction: an LSTM over each sentence reversed
                self.lstm_backward = nn.LSTM(dim, dim, batch_first=True)
        elif encoder_type == "lstm_no_output_gate":
            self.lstm = NoOutputGateLSTM(dim, dim)
        if encoder_type == "gran":
            # GRAN: a_t = x_t * sigmoid(W_x x_t + W_h h_t + b)
            self.gate_input = nn.Linear(dim, dim)
            self.gate_hidden = nn.Linear(dim, dim, bias=False)

    def forward(self, vectors: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """`(bags, dim)` from flat `(total, dim)` unit vectors in bags starting at `offsets`."""
        padded, lengths = to_padded(vectors, offsets)
        if self.encoder_type == "projection":
            return self.projection(masked_mean(padded, lengths))
        if self.encoder_type == "lstm_no_output_gate":
            return masked_mean(self.lstm(padded, lengths), lengths)
        states = run_lstm(self.lstm, padded, lengths, self.pack)
        if self.encoder_type == "blstm":
            order = reversed_positions(lengths, padded.shape[1])
            backward = run_lstm(self.lstm_backward, _gather_steps(padded, order), lengths, self.pack)
            states = (states + _gather_steps(backward, order)) / 2
        if self.encoder_type == "gran":
            states = padded * torch.sigmoid(self.gate_input(padded) + self.gate_hidden(states))
        return masked_mean(states, lengths)


def run_lstm(lstm: nn.LSTM, padded: torch.Tensor, lengths: torch.Tensor, pack: bool | None = None) -> torch.Tensor:
    """Hidden states of a unidirectional `lstm` over zero-padded sequences; states past a length are garbage.

    On a GPU the sequences are packed (cuDNN skips the padding). On a CPU, packed sequences run several times
    slower than one padded batch, and a forward LSTM's states at real steps do not depend on later padding, so
    the padded batch is run as it is and `masked_mean` ignores the steps past each length. `pack` forces either.
    """
    if not (padded.is_cuda if pack is None else pack):
        return lstm(padded)[0]
    packed = pack_padded_sequence(padded, lengths.clamp_min(1).cpu(), batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=padded.shape[1])[0]


def reversed_positions(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """`(bags, steps)` index that reverses the first `lengths[i]` steps of row i and keeps the padding after."""
    position = torch.arange(steps, device=lengths.device).unsqueeze(0)
    return torch.where(position < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - position, position)


def _gather_steps(sequence: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    return sequence.gather(1, order.unsqueeze(-1).expand(-1, -1, sequence.shape[-1]))


def unit_codes(
    flat_ids: torch.Tensor, offsets: torch.Tensor, units: str, space_id: int, char_vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes of the word or trigram units of character-id bags: `(codes, offsets)` in the bag layout.

    Runs of `space_id` separate words (a bag's start and end are boundaries too); a trigram is three consecutive
    characters of a word padded with one `space_id` on each side, so "a" gives one trigram and "cat" three.
    """
    device = flat_ids.device
    n = offsets.numel()
    bag, position, lengths = bag_positions(offsets, flat_ids.numel())
    # Each bag framed by one space on each side: the extended layout has two more entries per bag.
    ext_lengths = lengths + 2
    ext_offsets = torch.zeros_like(offsets)
    if n > 1:
        ext_offsets[1:] = torch.cumsum(ext_lengths, 0)[:-1]
    ext_total = int(ext_lengths.sum())
    chars = torch.full((ext_total,), space_id, dtype=torch.long, device=device)
    chars[ext_offsets[bag] + position + 1] = flat_ids.long()
    ext_bag = torch.repeat_interleave(torch.arange(n, device=device), ext_lengths)
    is_space = chars == space_id
    if units == "trigrams":
        start = torch.arange(max(ext_total - 2, 0), device=device)
        same_bag = ext_bag[start] == ext_bag[start + 2]
        # A trigram is centred on a character (a word's first, middle or last letter), and its ends may be the
        # boundary marks; one with a space inside (e.g. "t d" across two words) is not a trigram of any word.
        valid = same_bag & ~is_space[start + 1]
        keep = start[valid]
        codes = (chars[keep] * char_vocab_size + chars[keep + 1]) * char_vocab_size + chars[keep + 2]
        return codes, _bag_offsets(ext_bag[keep], n)
    # Words: maximal runs of non-space characters.
    letter = ~is_space
    word_start = letter & torch.cat([torch.ones(1, dtype=torch.bool, device=device), is_space[:-1]])
    word_id = torch.cumsum(word_start.long(), 0) - 1
    letters = torch.nonzero(letter).squeeze(1)
    owner = word_id[letters]
    n_words = int(word_start.sum())
    first_letter = torch.nonzero(word_start).squeeze(1)
    rank = letters - first_letter[owner]
    values = chars[letters] + 1
    codes = torch.zeros(n_words, dtype=torch.long, device=device)
    for prime, base in zip(WORD_HASH_PRIMES, WORD_HASH_BASES, strict=True):
        powers = _powers(base, prime, int(rank.max()) + 1 if rank.numel() else 1, device)
        terms = (values * powers[rank]) % prime
        hashed = torch.zeros(n_words, dtype=torch.long, device=device).index_add_(0, owner, terms) % prime
        codes = codes * prime + hashed if prime == WORD_HASH_PRIMES[1] else hashed
    return codes, _bag_offsets(ext_bag[first_letter], n)


def _powers(base: int, prime: int, count: int, device: torch.device) -> torch.Tensor:
    values = [1]
    for _ in range(count - 1):
        values.append(values[-1] * base % prime)
    return torch.tensor(values, dtype=torch.long, device=device)


def _bag_offsets(bag_of_unit: torch.Tensor, n: int) -> torch.Tensor:
    counts = torch.bincount(bag_of_unit, minlength=n)
    offsets = torch.zeros(n, dtype=torch.long, device=bag_of_unit.device)
    if n > 1:
        offsets[1:] = torch.cumsum(counts, 0)[:-1]
    return offsets


def codes_to_rows(codes: torch.Tensor, sorted_codes: torch.Tensor, unk_row: int = 0) -> torch.Tensor:
    """Table rows of unit codes (`sorted_codes[i]` is row i + 2); a code not in the buffer is the unknown row."""
    if sorted_codes.numel() == 0:
        return torch.full_like(codes, unk_row)
    index = torch.searchsorted(sorted_codes, codes).clamp_max(sorted_codes.numel() - 1)
    found = sorted_codes[index] == codes
    return torch.where(found, index + FIRST_UNIT_ROW, torch.full_like(index, unk_row))


__all__ = [
    "AVERAGING",
    "FIRST_UNIT_ROW",
    "RECURRENT",
    "NoOutputGateLSTM",
    "SentenceHead",
    "codes_to_rows",
    "masked_mean",
    "to_padded",
    "unit_codes",
]
