/* SPDX-License-Identifier: MIT */
/*
 * The part of fio 3.33's engine ABI (FIO_IOOPS_VERSION 31) that the xbd
 * engine uses.  Debian ships fio without development headers, so these
 * are written here from reading fio's public source and checked against
 * the installed binary: the sizes and offsets below are asserted at
 * compile time, and engine.c checks at load time that the stride and
 * field offsets of fio's own exported option table (fio_options) match
 * struct fio_option, and that every io_u it is given is self-consistent
 * (xfer_buf == buf, xfer_buflen == buflen).  Only the members the engine
 * touches are named; the rest are padding of the right size.
 */
#ifndef XBD_FIO_ABI_H
#define XBD_FIO_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define FIO_IOOPS_VERSION 31

struct thread_data;             /* opaque but for the three fields below */
struct fio_file;                /* opaque but for the two fields below */

/*
 * struct thread_data members the iomem_alloc/iomem_free hooks use, read
 * from the disassembly of fio's exported allocate_io_mem() and
 * free_io_mem(): orig_buffer (allocate_io_mem stores malloc's result
 * there; free_io_mem clears it), orig_buffer_size right after it, and
 * io_ops (the engine whose iomem_alloc at 0xb8 is called).  engine.c
 * checks at load time that free_io_mem's code still addresses exactly
 * these three offsets, and in iomem_alloc that td's io_ops is ours.
 */
#define FIO_TD_ORIG_BUFFER_OFF       0x2e280
#define FIO_TD_ORIG_BUFFER_SIZE_OFF  0x2e288
#define FIO_TD_IO_OPS_OFF            0x2e600

/* struct fio_file members, as fio's generic_get_file_size() uses them
 * (read from its disassembly): real_file_size, and flags with
 * FIO_FILE_size_known. */
#define FIO_FILE_REAL_SIZE_OFF  0x30
#define FIO_FILE_FLAGS_OFF      0x16c
#define FIO_FILE_SIZE_KNOWN     0x10

enum fio_ddir {
	DDIR_READ = 0,
	DDIR_WRITE = 1,
	DDIR_TRIM = 2,
	DDIR_SYNC = 3,
	DDIR_DATASYNC = 4,
	DDIR_SYNC_FILE_RANGE = 5,
	DDIR_WAIT = 6,
};

enum fio_q_status {
	FIO_Q_COMPLETED = 0,
	FIO_Q_QUEUED = 1,
	FIO_Q_BUSY = 2,
};

/* enum fio_ioengine_flags */
#define FIO_SYNCIO      (1 << 0)
#define FIO_DISKLESSIO  (1 << 2)
#define FIO_NOEXTEND    (1 << 3)
#define FIO_NODISKUTIL  (1 << 4)

/* struct io_u: the first 160 bytes. */
struct io_u {
	struct timespec start_time;
	struct timespec issue_time;
	struct fio_file *file;
	unsigned int flags;
	int ddir;                       /* enum fio_ddir */
	int acct_ddir;
	unsigned short numberio, ioprio, clat_prio_index;
	unsigned long long buflen;
	unsigned long long offset;
	unsigned long long verify_offset;
	void *buf;
	uint64_t rand_seed;
	void *xfer_buf;
	unsigned long long xfer_buflen;
	unsigned long long buf_filled_len;
	void *ipo;
	unsigned long long resid;
	unsigned int error;             /* positive errno */
	unsigned int index;
	void *engine_data;
};
_Static_assert(offsetof(struct io_u, ddir) == 44, "io_u.ddir");
_Static_assert(offsetof(struct io_u, buflen) == 64, "io_u.buflen");
_Static_assert(offsetof(struct io_u, offset) == 72, "io_u.offset");
_Static_assert(offsetof(struct io_u, buf) == 88, "io_u.buf");
_Static_assert(offsetof(struct io_u, xfer_buf) == 104, "io_u.xfer_buf");
_Static_assert(offsetof(struct io_u, xfer_buflen) == 112, "io_u.xfer_buflen");
_Static_assert(offsetof(struct io_u, resid) == 136, "io_u.resid");
_Static_assert(offsetof(struct io_u, error) == 144, "io_u.error");
_Static_assert(offsetof(struct io_u, engine_data) == 152, "io_u.engine_data");

enum fio_opt_type {
	FIO_OPT_INVALID = 0,
	FIO_OPT_STR,
	FIO_OPT_STR_ULL,
	FIO_OPT_STR_MULTI,
	FIO_OPT_STR_VAL,
	FIO_OPT_STR_VAL_TIME,
	FIO_OPT_STR_STORE,              /* 6: checked against fio_options at load */
	FIO_OPT_RANGE,
	FIO_OPT_INT,
};

#define FIO_OPT_C_ENGINE   (1u << 6)  /* enum opt_category: only for --help grouping */

struct value_pair {
	const char *ival;
	unsigned long long oval;
	const char *help;
	int orval;
	void *cb;
};

#define PARSE_MAX_VP 32

struct fio_option {
	const char *name;
	const char *lname;
	const char *alias;
	enum fio_opt_type type;
	unsigned int off1, off2, off3, off4, off5, off6;
	unsigned long long maxval;
	int minval;
	double maxfp, minfp;
	unsigned int interval, maxlen;
	int neg, prio;
	void *cb;
	const char *help;
	const char *def;
	struct value_pair posval[PARSE_MAX_VP];
	const char *parent;
	int hide, hide_on_set;
	const char *inverse;
	struct fio_option *inv_opt;
	void *verify;
	const char *prof_name;
	void *prof_opts;
	uint64_t category, group;
	void *gui_data;
	int is_seconds, is_time, no_warn_def, pow2, no_free;
};
_Static_assert(offsetof(struct fio_option, type) == 24, "fio_option.type");
_Static_assert(offsetof(struct fio_option, off1) == 28, "fio_option.off1");
_Static_assert(offsetof(struct fio_option, help) == 112, "fio_option.help");
_Static_assert(sizeof(struct fio_option) == 1512, "fio_option size");

struct flist_head { struct flist_head *next, *prev; };

struct ioengine_ops {
	struct flist_head list;
	const char *name;
	int version;
	int flags;
	void *dlhandle;
	int (*setup)(struct thread_data *);
	int (*init)(struct thread_data *);
	int (*post_init)(struct thread_data *);
	int (*prep)(struct thread_data *, struct io_u *);
	enum fio_q_status (*queue)(struct thread_data *, struct io_u *);
	int (*commit)(struct thread_data *);
	int (*getevents)(struct thread_data *, unsigned int, unsigned int,
			 const struct timespec *);
	struct io_u *(*event)(struct thread_data *, int);
	char *(*errdetails)(struct io_u *);
	int (*cancel)(struct thread_data *, struct io_u *);
	void (*cleanup)(struct thread_data *);
	int (*open_file)(struct thread_data *, struct fio_file *);
	int (*close_file)(struct thread_data *, struct fio_file *);
	int (*invalidate)(struct thread_data *, struct fio_file *);
	int (*unlink_file)(struct thread_data *, struct fio_file *);
	int (*get_file_size)(struct thread_data *, struct fio_file *);
	int (*prepopulate_file)(struct thread_data *, struct fio_file *);
	void (*terminate)(struct thread_data *);
	int (*iomem_alloc)(struct thread_data *, size_t);
	void (*iomem_free)(struct thread_data *);
	int (*io_u_init)(struct thread_data *, struct io_u *);
	void (*io_u_free)(struct thread_data *, struct io_u *);
	void *get_zoned_model, *report_zones, *reset_wp, *get_max_open_zones;
	int option_struct_size;
	struct fio_option *options;
};
/* Found with a probe engine whose hooks report their slot (setup is slot
 * 0, invalidate 13, prepopulate_file 16), in fio's ioengine_load, which
 * reads option_struct_size at 0xf8 and options at 0x100, and in
 * allocate_io_mem / free_io_mem, which call iomem_alloc at 0xb8 and
 * iomem_free at 0xc0. */
_Static_assert(offsetof(struct ioengine_ops, setup) == 40, "ops.setup");
_Static_assert(offsetof(struct ioengine_ops, prepopulate_file) == 40 + 16 * 8, "ops.prepopulate");
_Static_assert(offsetof(struct ioengine_ops, iomem_alloc) == 0xb8, "ops.iomem_alloc");
_Static_assert(offsetof(struct ioengine_ops, iomem_free) == 0xc0, "ops.iomem_free");
_Static_assert(offsetof(struct ioengine_ops, option_struct_size) == 0xf8, "ops.option_struct_size");
_Static_assert(offsetof(struct ioengine_ops, options) == 0x100, "ops.options");

#endif
