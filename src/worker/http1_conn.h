/* placeholder */
#pragma once
