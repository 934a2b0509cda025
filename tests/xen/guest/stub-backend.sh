#!/bin/bash
# A stand-in backend for one vbd: plays only the xenstore side of the
# backend's state machine, so the hotplug script can be tested without a
# backend doing I/O.  It waits for libxl's state 1, writes InitWait (2),
# waits for the hotplug script's hotplug-status, logs the frontend
# reaching Initialised (3), and answers Closing (5) with Closed (6).
# Every wait is bounded (60 s).
# Usage: stub-backend.sh DOMID DEVID
BE=/local/domain/0/backend/vbd/$1/$2
FE=/local/domain/$1/device/vbd/$2
rd() { xenstore-read "$1" 2>/dev/null; }
until_true() { # CONDITION (a shell expression), bounded
	local i
	for i in $(seq 600); do eval "$1" && return 0; sleep 0.1; done
	echo "timeout waiting for: $1"
	exit 1
}
until_true '[ "$(rd $BE/state)" = 1 ]'
echo "state=1 params=$(rd $BE/params) script=$(rd $BE/script)"
xenstore-write $BE/feature-flush-cache 1 $BE/multi-queue-max-queues 2 \
	$BE/max-ring-page-order 2 $BE/state 2
echo "wrote state=2"
until_true '[ -n "$(rd $BE/hotplug-status)" ] || [ "$(rd $BE/state)" = 5 ]'
echo "hotplug-status=$(rd $BE/hotplug-status) hotplug-error=$(rd $BE/hotplug-error)"
until_true '[ "$(rd $BE/state)" = 5 ] || [ "$(rd $FE/state)" = 3 ]'
[ "$(rd $FE/state)" = 3 ] && echo "frontend state=3"
until_true '[ "$(rd $BE/state)" = 5 ] || [ -z "$(rd $BE/state)" ]'
[ -n "$(rd $BE/state)" ] && xenstore-write $BE/state 6 && echo "state=5 online=$(rd $BE/online): wrote state=6"
until_true '[ -z "$(rd $BE/state)" ]'
echo "backend directory removed"
