/* SPDX-License-Identifier: MIT */
/*
 * The FUSE-over-io_uring ABI of the kernel, FUSE protocol 7.42 (Linux
 * 6.14 and later), for a <linux/fuse.h> older than that (Debian 12's is
 * 7.38).  Only what fuse_uring.c uses; the layouts are the kernel's.
 */
#ifndef XBD_BLKFRONT_FUSE_URING_ABI_H
#define XBD_BLKFRONT_FUSE_URING_ABI_H

#include <linux/fuse.h>
#include <stdint.h>

#ifndef FUSE_OVER_IO_URING
/* INIT flag (bit 41: flags2 bit 9): the kernel offers, the server takes */
#define FUSE_OVER_IO_URING (1ULL << 41)

#define FUSE_URING_IN_OUT_HEADER_SZ 128
#define FUSE_URING_OP_IN_OUT_SZ 128

/* A ring entry's metadata: the kernel writes commit_id (the request's
 * unique) and payload_sz with a request, the server payload_sz with its
 * answer (the bytes of the answer's arguments in the payload buffer). */
struct fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

/* A ring entry's header buffer (iov[0] of its REGISTER): in_out holds
 * the fuse_in_header of a request, then the fuse_out_header of its
 * answer; op_in the request's first argument (e.g. fuse_read_in). */
struct fuse_uring_req_header {
	char in_out[FUSE_URING_IN_OUT_HEADER_SZ];
	char op_in[FUSE_URING_OP_IN_OUT_SZ];
	struct fuse_uring_ent_in_out ring_ent_in_out;
};

/* io_uring_sqe.cmd_op of an IORING_OP_URING_CMD on /dev/fuse */
enum fuse_uring_cmd {
	FUSE_IO_URING_CMD_INVALID = 0,
	FUSE_IO_URING_CMD_REGISTER = 1,          /* addr: iovec[2], len 2 */
	FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

/* The command in the 128-byte SQE's cmd area */
struct fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};
#endif

#endif
