/* SPDX-License-Identifier: MIT */
/*
 * blkif wire layouts for the two ABIs the frontend can speak.
 *
 * <xen/io/blkif.h> describes the native layout of the build machine only.
 * A frontend that must speak "x86_32-abi" to a 64-bit backend (or the other
 * way round, for testing backends) needs both, so they are spelled out here
 * with every padding byte named and checked by static_assert against the
 * offsets in blkif.h and in the Linux backend's x86_32 view.  Constants
 * (BLKIF_OP_*, BLKIF_RSP_*, segment limits) come from blkif.h itself.
 *
 * Only frontend/ring.c touches the shared ring through these types.
 */
#ifndef XBD_FRONTEND_WIRE_H
#define XBD_FRONTEND_WIRE_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include <xen/xen.h>
#include <xen/grant_table.h>
#include <xen/io/blkif.h>
#include <xen/io/protocols.h>

/* One segment: identical in both ABIs, and the entry type of indirect
 * pages (512 of them per 4 KiB page). */
struct fe_wire_seg {
	uint32_t gref;
	uint8_t first_sect;
	uint8_t last_sect;
	uint16_t pad;
};

/* The shared ring header (struct blkif_sring without the entries). */
struct fe_wire_sring_hdr {
	uint32_t req_prod;
	uint32_t req_event;
	uint32_t rsp_prod;
	uint32_t rsp_event;
	uint8_t pvt[4];
	uint8_t pad[44];
};

/* ---- x86_64-abi: natural alignment ---------------------------------- */

struct fe_x64_req_rw {
	uint8_t operation;
	uint8_t nr_segments;
	uint16_t handle;
	uint32_t pad;
	uint64_t id;
	uint64_t sector_number;
	struct fe_wire_seg seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
};

struct fe_x64_req_discard {
	uint8_t operation;
	uint8_t flag;
	uint16_t handle;
	uint32_t pad;
	uint64_t id;
	uint64_t sector_number;
	uint64_t nr_sectors;
};

struct fe_x64_req_indirect {
	uint8_t operation;
	uint8_t indirect_op;
	uint16_t nr_segments;
	uint32_t pad0;
	uint64_t id;
	uint64_t sector_number;
	uint16_t handle;
	uint16_t pad1;
	uint32_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	uint32_t pad2;
};

struct fe_x64_rsp {
	uint64_t id;
	uint8_t operation;
	uint8_t pad0;
	int16_t status;
	uint32_t pad1;
};

/* ---- x86_32-abi: 64-bit fields aligned to 4 (i386 rules) ------------ */

struct __attribute__((packed, aligned(4))) fe_x32_req_rw {
	uint8_t operation;
	uint8_t nr_segments;
	uint16_t handle;
	uint64_t id;
	uint64_t sector_number;
	struct fe_wire_seg seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
};

struct __attribute__((packed, aligned(4))) fe_x32_req_discard {
	uint8_t operation;
	uint8_t flag;
	uint16_t handle;
	uint64_t id;
	uint64_t sector_number;
	uint64_t nr_sectors;
};

struct __attribute__((packed, aligned(4))) fe_x32_req_indirect {
	uint8_t operation;
	uint8_t indirect_op;
	uint16_t nr_segments;
	uint64_t id;
	uint64_t sector_number;
	uint16_t handle;
	uint16_t pad1;
	uint32_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	uint64_t pad2;
};

struct __attribute__((packed, aligned(4))) fe_x32_rsp {
	uint64_t id;
	uint8_t operation;
	uint8_t pad0;
	int16_t status;
};

/* Segments per indirect page. */
#define FE_SEGS_PER_INDIRECT_PAGE (4096u / sizeof(struct fe_wire_seg))
/* Protocol ceiling on segments of one indirect request. */
#define FE_MAX_INDIRECT_SEGS \
	(BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST * FE_SEGS_PER_INDIRECT_PAGE)

/* ---- layout checks ---------------------------------------------------- */

static_assert(sizeof(struct fe_wire_seg) == 8, "segment size");
static_assert(sizeof(struct blkif_request_segment) == 8, "blkif.h segment");
static_assert(sizeof(struct fe_wire_sring_hdr) == 64, "sring header");
static_assert(FE_SEGS_PER_INDIRECT_PAGE == 512, "segments per page");

static_assert(sizeof(struct fe_x64_req_rw) == 112, "x86_64 request");
static_assert(offsetof(struct fe_x64_req_rw, id) == 8, "x86_64 id");
static_assert(offsetof(struct fe_x64_req_rw, sector_number) == 16, "x86_64 sector");
static_assert(offsetof(struct fe_x64_req_rw, seg) == 24, "x86_64 seg");
static_assert(sizeof(struct fe_x64_req_discard) == 32, "x86_64 discard");
static_assert(offsetof(struct fe_x64_req_discard, nr_sectors) == 24, "x86_64 nr_sectors");
static_assert(sizeof(struct fe_x64_req_indirect) == 64, "x86_64 indirect");
static_assert(offsetof(struct fe_x64_req_indirect, handle) == 24, "x86_64 ind handle");
static_assert(offsetof(struct fe_x64_req_indirect, indirect_grefs) == 28, "x86_64 grefs");
static_assert(sizeof(struct fe_x64_rsp) == 16, "x86_64 response");
static_assert(offsetof(struct fe_x64_rsp, operation) == 8, "x86_64 rsp op");
static_assert(offsetof(struct fe_x64_rsp, status) == 10, "x86_64 rsp status");

static_assert(sizeof(struct fe_x32_req_rw) == 108, "x86_32 request");
static_assert(offsetof(struct fe_x32_req_rw, id) == 4, "x86_32 id");
static_assert(offsetof(struct fe_x32_req_rw, sector_number) == 12, "x86_32 sector");
static_assert(offsetof(struct fe_x32_req_rw, seg) == 20, "x86_32 seg");
static_assert(sizeof(struct fe_x32_req_discard) == 28, "x86_32 discard");
static_assert(offsetof(struct fe_x32_req_discard, nr_sectors) == 20, "x86_32 nr_sectors");
static_assert(sizeof(struct fe_x32_req_indirect) == 64, "x86_32 indirect");
static_assert(offsetof(struct fe_x32_req_indirect, handle) == 20, "x86_32 ind handle");
static_assert(offsetof(struct fe_x32_req_indirect, indirect_grefs) == 24, "x86_32 grefs");
static_assert(sizeof(struct fe_x32_rsp) == 12, "x86_32 response");
static_assert(offsetof(struct fe_x32_rsp, operation) == 8, "x86_32 rsp op");
static_assert(offsetof(struct fe_x32_rsp, status) == 10, "x86_32 rsp status");

#if defined(__x86_64__)
/* On x86_64 the native blkif.h layout must be exactly our x86_64 view. */
static_assert(sizeof(struct blkif_request) == sizeof(struct fe_x64_req_rw), "native req");
static_assert(offsetof(struct blkif_request, seg) == offsetof(struct fe_x64_req_rw, seg), "native seg");
static_assert(sizeof(struct blkif_response) == sizeof(struct fe_x64_rsp), "native rsp");
static_assert(offsetof(struct blkif_response, status) == offsetof(struct fe_x64_rsp, status), "native status");
static_assert(offsetof(struct blkif_request_indirect, indirect_grefs) ==
	      offsetof(struct fe_x64_req_indirect, indirect_grefs), "native grefs");
static_assert(offsetof(struct blkif_request_discard, nr_sectors) ==
	      offsetof(struct fe_x64_req_discard, nr_sectors), "native discard");
static_assert(offsetof(struct blkif_sring, ring) == sizeof(struct fe_wire_sring_hdr), "native sring");
#endif

#endif
