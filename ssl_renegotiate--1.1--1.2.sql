/* ssl_renegotiate--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION ssl_renegotiate UPDATE TO '1.2'" to load this file. \quit

-- Section: the activity view (limits in force on every row).

-- Section: totals per database and role.
