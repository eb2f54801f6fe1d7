// Reading a quantized matrix's bytes from a buffer of 32-bit words: the
// blocks of GGUF's types are packed without padding (Q8_0 takes 34 bytes),
// so their fields sit at any byte offset. Expects a buffer `W` of uint `w[]`.
uint byte_at(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }
int signed_byte_at(uint b) { return int(byte_at(b) << 24) >> 24; }
float half_at(uint b) { return unpackHalf2x16(byte_at(b) | (byte_at(b + 1u) << 8)).x; }
float bfloat_at(uint b) { return uintBitsToFloat((byte_at(b) | (byte_at(b + 1u) << 8)) << 16); }
uint word_at(uint b) { return byte_at(b) | (byte_at(b + 1u) << 8) | (byte_at(b + 2u) << 16) | (byte_at(b + 3u) << 24); }
