/*
 * threads_queue.c — the baseline of threads_post.c: the textbook queue
 * between two threads, a linked list under a pthread mutex with a
 * condition variable the consumer waits on while it is empty.
 *
 *   producer, per item:  node = malloc; lock; append;
 *                        pthread_cond_signal; unlock
 *   consumer, per item:  lock; while empty: pthread_cond_wait;
 *                        take the first node; unlock; run it; free it
 *
 * The same shape as the coroutine side: one allocation per item, made by
 * the producer and released by the consumer, and the same function run
 * per item (it checks the order). The consumer is the harness's thread;
 * the producer is a second thread that posts n items per round.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct node {
    struct node *next;
    void (*fn)(void *arg);
    void *arg;
} node;

typedef struct {
    /* The queue. */
    pthread_mutex_t qlock;
    pthread_cond_t nonempty;
    node *head, *tail;

    /* Consumer's side. */
    uint64_t received, out_of_order;

    /* The producer and its orders. */
    pthread_t producer;
    pthread_mutex_t lock;
    pthread_cond_t order;
    uint64_t order_seq, order_n;
    bool stop;
    uint64_t sent;
} state;

static state the_state;

/* The work of one item, as in threads_post.c. */
static void on_item(void *arg) {
    state *p = &the_state;
    if ((uint64_t)(uintptr_t)arg != p->received)
        p->out_of_order++;
    p->received++;
}

static void push(state *p, void (*fn)(void *), void *arg) {
    node *n = malloc(sizeof *n);
    if (n == NULL)
        abort(); /* the consumer would wait for it forever */
    n->next = NULL;
    n->fn = fn;
    n->arg = arg;
    pthread_mutex_lock(&p->qlock);
    if (p->tail != NULL)
        p->tail->next = n;
    else
        p->head = n;
    p->tail = n;
    pthread_cond_signal(&p->nonempty);
    pthread_mutex_unlock(&p->qlock);
}

static node *pop(state *p) {
    node *n;
    pthread_mutex_lock(&p->qlock);
    while (p->head == NULL)
        pthread_cond_wait(&p->nonempty, &p->qlock);
    n = p->head;
    p->head = n->next;
    if (p->head == NULL)
        p->tail = NULL;
    pthread_mutex_unlock(&p->qlock);
    return n;
}

static void *producer_main(void *arg) {
    state *p = arg;
    uint64_t seen = 0;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->order_seq == seen && !p->stop)
            pthread_cond_wait(&p->order, &p->lock);
        if (p->stop)
            break;
        seen = p->order_seq;
        uint64_t n = p->order_n;
        pthread_mutex_unlock(&p->lock);
        for (uint64_t i = 0; i < n; i++)
            push(p, on_item, (void *)(uintptr_t)p->sent++);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static int setup(void *ctx) {
    state *p = ctx;
    pthread_mutex_init(&p->qlock, NULL);
    pthread_cond_init(&p->nonempty, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->order, NULL);
    if (pthread_create(&p->producer, NULL, producer_main, p) != 0) {
        fprintf(stderr, "queue: pthread_create failed\n");
        return 1;
    }
    return 0;
}

/* n items from the producer thread to this one. */
static void move_items(void *ctx, uint64_t n) {
    state *p = ctx;
    pthread_mutex_lock(&p->lock);
    p->order_n = n;
    p->order_seq++;
    pthread_cond_signal(&p->order);
    pthread_mutex_unlock(&p->lock);
    for (uint64_t i = 0; i < n; i++) {
        node *item = pop(p);
        item->fn(item->arg);
        free(item);
    }
}

static int teardown(void *ctx) {
    state *p = ctx;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->order);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->producer, NULL);
    if (p->received != p->sent || p->out_of_order != 0 || p->head != NULL) {
        fprintf(stderr, "queue: sent %llu, received %llu, %llu out of "
                "order\n", (unsigned long long)p->sent,
                (unsigned long long)p->received,
                (unsigned long long)p->out_of_order);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    bench_spec spec = {
        .name = "queue",
        .unit = "item",
        .units_per_op = 1,
        .setup = setup,
        .run = move_items,
        .teardown = teardown,
        .ctx = &the_state,
    };
    return bench_main(argc, argv, &spec);
}
