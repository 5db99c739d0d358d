package main

// The tail file of one task stream: a header, then a ring of capacity
// bytes in which byte n of the stream lives at n % capacity.
//
// The header is four little-endian uint64 and a CRC-32C of them:
//
//	0  end       the stream's bytes up to here are in the ring
//	8  capacity  the size of the ring
//	16 begin     where the write in progress will end (end when idle)
//	24 valid     the ring holds nothing of the stream before this offset
//	32 crc       of bytes 0-32, so that a read torn by a write is seen
//
// It is a seqlock over a file. Only the supervisor writes: it stores begin
// before it touches the ring and end after, so a reader that checks the
// header again after copying knows which of the bytes it copied a writer
// may have replaced meanwhile (those before begin - capacity), drops them
// and says so. A write that fails (a full disk) moves valid past the bytes
// it may have damaged; one whose warning cannot be stored does not touch
// the ring at all. A reader therefore returns bytes that were contiguous in
// the stream, or reports the gap, never a splice of two laps and never
// bytes that were not written.

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"time"
)

const tailHeader = 40

// castagnoli is the CRC table of a tail header, made on first use (a call
// that reads no task output never needs it).
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// ringHeader is the decoded header of a tail file.
type ringHeader struct {
	end, capacity, begin, valid int64
}

func (h *ringHeader) encode() []byte {
	b := make([]byte, tailHeader)
	for i, v := range []int64{h.end, h.capacity, h.begin, h.valid} {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli()))
	return b
}

// decodeRingHeader accepts only a whole header that makes sense.
func decodeRingHeader(b []byte) (ringHeader, bool) {
	if len(b) < tailHeader || binary.LittleEndian.Uint32(b[32:]) != crc32.Checksum(b[:32], castagnoli()) {
		return ringHeader{}, false
	}
	var v [4]int64
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	h := ringHeader{end: v[0], capacity: v[1], begin: v[2], valid: v[3]}
	ok := h.capacity > 0 && h.valid >= 0 && h.valid <= h.end && h.begin >= h.end
	return h, ok
}

// tailRing is the supervisor's side of a tail file.
type tailRing struct {
	f *os.File
	h ringHeader // as last stored, or tried
}

// newTailRing writes the header of an empty ring and reserves the ring's
// space, so that a disk that fills later still takes the ring's writes
// (best effort: a ring left sparse only loses what fails to reach it).
func newTailRing(f *os.File, capacity int64) (*tailRing, error) {
	r := &tailRing{f: f, h: ringHeader{capacity: capacity}}
	if err := r.store(); err != nil {
		return nil, err
	}
	zeros := make([]byte, min(capacity, 64<<10))
	for off := int64(0); off < capacity; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), capacity-off)], tailHeader+off); err != nil {
			break
		}
	}
	return r, nil
}

func (r *tailRing) store() error {
	_, err := r.f.WriteAt(r.h.encode(), 0)
	return err
}

// write appends p to the stream.
func (r *tailRing) write(p []byte) {
	next := r.h.end + int64(len(p))
	r.h.begin = next
	if r.store() != nil {
		// Readers were not warned, so the ring stays as it is and p is
		// lost from it.
		r.h.end, r.h.valid = next, next
		r.store()
		return
	}
	if r.put(p) != nil {
		r.h.valid = next
	}
	r.h.end = next
	r.store()
}

// put copies the part of p that fits into the ring at its place.
func (r *tailRing) put(p []byte) error {
	c := r.h.capacity
	off := r.h.end
	if int64(len(p)) > c {
		off += int64(len(p)) - c
		p = p[int64(len(p))-c:]
	}
	for len(p) > 0 {
		pos := off % c
		n := min(int64(len(p)), c-pos)
		if _, err := r.f.WriteAt(p[:n], tailHeader+pos); err != nil {
			return err
		}
		p, off = p[n:], off+n
	}
	return nil
}

// streamRead is what one read of one stream found.
type streamRead struct {
	data  []byte
	next  int64 // the cursor after this read
	lossy bool
}

// readTaskStream returns the bytes after cursor, at most limit of them (the
// newest): whatever else is unread is dropped and the read is lossy, as
// are bytes that a writer overwrote while they were being read.
func readTaskStream(p string, cursor, limit int64) streamRead {
	f, err := openOwn(p, os.O_RDONLY)
	if err != nil {
		return streamRead{next: cursor}
	}
	defer f.Close()
	h, ok := readRingHeader(f)
	if !ok || cursor >= h.end {
		return streamRead{next: max(cursor, h.end)}
	}
	lo := max(cursor, h.end-min(limit, h.capacity), h.begin-h.capacity, h.valid)
	data := make([]byte, max(h.end-lo, 0))
	for off := lo; off < h.end; {
		pos := off % h.capacity
		n := min(h.end-off, h.capacity-pos)
		if _, err := f.ReadAt(data[off-lo:off-lo+n], tailHeader+pos); err != nil {
			lo, data = h.end, nil
			break
		}
		off += n
	}
	// Whatever a writer began to overwrite while we copied is dropped.
	if now, ok := readRingHeader(f); !ok {
		lo, data = h.end, nil
	} else if keep := max(now.begin-now.capacity, now.valid); keep > lo {
		cut := min(keep-lo, int64(len(data)))
		data, lo = data[cut:], lo+cut
	}
	return streamRead{data: data, next: h.end, lossy: lo > cursor}
}

// readRingHeader reads a consistent header; a read that a write tore is
// retried.
func readRingHeader(f *os.File) (ringHeader, bool) {
	b := make([]byte, tailHeader)
	for try := 0; try < 100; try++ {
		if _, err := f.ReadAt(b, 0); err != nil {
			return ringHeader{}, false
		}
		if h, ok := decodeRingHeader(b); ok {
			return h, true
		}
		time.Sleep(time.Duration(try) * 10 * time.Microsecond)
	}
	return ringHeader{}, false
}

// readTailHeader returns the stream's length and the ring's capacity.
func readTailHeader(f *os.File) (total, capacity int64) {
	h, _ := readRingHeader(f)
	return h.end, h.capacity
}
