/* state.h — the chat's state directory and the conversations it keeps there
 * without being asked (no curses: unit-tested in tests/test_ui_state.c).
 *
 * The state directory is $XDG_STATE_HOME/gptscope, else
 * ~/.local/state/gptscope; when neither can be made and written, a private
 * $TMPDIR/gptscope-UID (else /tmp/gptscope-UID), and the note says why.
 *
 * Conversations: one file per conversation, STATE/chats/DATE-TIME-PID-N.json
 * (a session file, docs/session-format.md), claimed with O_EXCL so that no
 * two processes ever write one file. The chat saves the conversation there
 * after each message and reply and at every exit; /reset, /load and --continue
 * start the next file, so a conversation is never written over by another.
 * The newest STATE_KEEP files are kept, older ones removed when a new one is
 * claimed.
 *
 *     state_keeper k;
 *     state_keeper_init(&k);
 *     if (state_keep(&k, session, &err) != GPT2_OK) ... // k.path: where
 *     state_keep_next(&k);                               // a new conversation
 */
#ifndef GPTSCOPE_UI_STATE_H
#define GPTSCOPE_UI_STATE_H

#include <limits.h>
#include <stddef.h>

#include "gpt2.h"

enum { STATE_KEEP = 100 }; /* conversations kept in chats/ */

/* The state directory (made if missing) into out; note gets "" or why a
 * fallback was used. 0 ok, -1 none usable (note says why). */
int state_dir(char *out, size_t cap, char *note, size_t note_cap);

/* STATE/name into out: 1 ok, 0 no usable state directory or too long. */
int state_path(const char *name, char *out, size_t cap);

typedef struct {
    char path[PATH_MAX]; /* this conversation's file; "" until it is first saved */
    char note[512];      /* "" or why the state directory is a fallback */
    int seq;             /* conversations this process began */
} state_keeper;

void state_keeper_init(state_keeper *k);
/* Saves the conversation to its file (claiming one on the first save);
 * nothing for a session without turns. GPT2_ERR_IO naming the file or the
 * directory on failure. */
gpt2_status state_keep(state_keeper *k, const gpt2_session *s, gpt2_error *err);
/* The next save claims a new file: a new conversation begins. */
void state_keep_next(state_keeper *k);

/* The newest kept conversation whose model is `model` with n_vocab tokens,
 * into out (1), or 0 for none. newer_other (may be NULL) gets the newest
 * kept conversation of another model when it is newer, else "". */
int state_latest_chat(const char *model, int n_vocab, char *out, size_t cap, char *newer_other,
                      size_t other_cap);

#endif
